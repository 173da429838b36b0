"""Bernoulli Monte Carlo throughput: vectorised engine vs the plain per-trial Python loop.

Both simulate the same 3-drafter cascade (target steps of Algorithm 1 with identical
semantics) in one run, interleaved, best of ``--repeats`` runs each (the machine is
shared); both are checked against the exact EWIF so the speed is not bought with wrong
answers. Prints target steps per second and the ratio.

    .venv/bin/python benchmarks/bench_simulate.py [--trials N] [--loop-trials M]
"""

from __future__ import annotations

import argparse
import json
import platform

import numpy as np

from ewif.files.presets import load_preset
from ewif.kernel.cascade import Cascade
from simulate.bernoulli import simulate
from simulate.loop_reference import simulate_loop


def cascades() -> dict[str, Cascade]:
    """Two 3-drafter cascades: the FLAN-T5 preset's tuned one, and a shallow-budget one."""
    ms = load_preset("flan-t5-ms")
    a = np.full((4, 4), np.nan)
    a[0, 1:] = [0.8, 0.7, 0.5]
    a[1, 2:] = [0.85, 0.6]
    a[2, 3] = 0.65
    small = Cascade(a, [1.0, 0.1, 0.03, 0.0], [[2, 2, 5], [0, 3, 5], [0, 0, 5]])
    return {
        "flan-t5-ms cascade section": ms.to_cascade(),
        "K=[[2,2,5],[0,3,5],[0,0,5]]": small,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=2_000_000, help="vectorised target steps")
    p.add_argument("--loop-trials", type=int, default=20_000, help="plain-loop target steps")
    p.add_argument("--repeats", type=int, default=3, help="interleaved runs; best is kept")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    for name, cascade in cascades().items():
        simulate(cascade, 50_000, seed=99)  # warm-up (imports, allocator)
        vecs, loops = [], []
        for i in range(args.repeats):
            vecs.append(simulate(cascade, args.trials, seed=1 + i))
            loops.append(simulate_loop(cascade, args.loop_trials, seed=2 + i))
        vec = max(vecs, key=lambda r: r.steps_per_second)
        loop = max(loops, key=lambda r: r.steps_per_second)
        exact = cascade.ewif()
        rows.append(
            {
                "cascade": name,
                "K": cascade.K.tolist(),
                "exact_ewif": exact,
                "vectorised_steps_per_s": vec.steps_per_second,
                "loop_steps_per_s": loop.steps_per_second,
                "speedup": vec.steps_per_second / loop.steps_per_second,
                "vectorised_ewif": vec.ewif().to_dict(),
                "loop_ewif": loop.ewif().to_dict(),
                "both_contain_exact": vec.ewif().contains(exact) and loop.ewif().contains(exact),
            }
        )
    if args.json:
        print(
            json.dumps(
                {"machine": platform.processor() or platform.machine(), "rows": rows}, indent=2
            )
        )
        return
    print(
        f"{'cascade':<30} {'vectorised steps/s':>19} {'loop steps/s':>13} {'ratio':>7}  "
        f"EWIF exact / vectorised / loop"
    )
    for r in rows:
        print(
            f"{r['cascade']:<30} {r['vectorised_steps_per_s']:>19,.0f} "
            f"{r['loop_steps_per_s']:>13,.0f} {r['speedup']:>6.0f}x  "
            f"{r['exact_ewif']:.4f} / {r['vectorised_ewif']['value']:.4f} / "
            f"{r['loop_ewif']['value']:.4f}  (intervals contain exact: "
            f"{r['both_contain_exact']})"
        )


if __name__ == "__main__":
    main()
