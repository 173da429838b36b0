"""Does ranking by the endless EWIF pick the configuration a short generation wants?

The optimizer (:func:`ewif.search.optimizer.optimize`) ranks configurations by the renewal–reward
EWIF of an endless generation; a run's requests stop at ``max_new_tokens``, where Theorem FL
(:mod:`ewif.kernel.finite_length`) gives the exact speed-up. For every shipped run's model set
(``realrun/data/cpu_results_*.json``) this takes the recommendation's exact top ``--top``
configurations by the endless EWIF, evaluates each at ``--max-new-tokens`` and reports the
best of them by that finite-length EWIF: its rank in the endless order and what choosing
the endless optimum instead costs. No model runs; a few seconds per run.

Run: ``.venv/bin/python benchmarks/finite_length_ranking.py [--top 200] [--max-new-tokens 32]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ewif.files import results as results_io
from ewif.files.model_set import ModelSet
from ewif.search.recommendation import recommend

DATA = Path(__file__).resolve().parent.parent / "realrun" / "data"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--top", type=int, default=200)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--k-max", type=int, default=12)
    args = p.parse_args(argv)
    n = args.max_new_tokens
    print(f"{'run':42} {'ranked':>6}  {'endless optimum':<44} {'EWIF_N':>7}  best by EWIF_N")
    for path in sorted(DATA.glob("cpu_results_*.json")):
        run = results_io.load(path)
        model_set = ModelSet.from_dict(run.metadata["model_set"], str(path))
        result = recommend(model_set, k_max=args.k_max, top=args.top).result
        finite = [result.cascade(c).ewif(n) for c in result.table]
        rank = max(range(len(finite)), key=finite.__getitem__)
        best = result.table[rank]
        gap = finite[rank] / finite[0] - 1.0
        print(
            f"{path.stem:42} {len(result.table):>6}  {result.table[0].describe():<44.44} "
            f"{finite[0]:7.4f}  "
            + (
                "the same"
                if rank == 0
                else f"#{rank + 1} {best.describe()} {finite[rank]:.4f} (+{gap:.2%})"
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
