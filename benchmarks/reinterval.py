"""Recompute the prediction intervals of real runs with the current ``ewif.bootstrap``.

No model runs: every results file (default: the shipped ``realrun/data/cpu_results_*.json``;
or the files given) carries its model set (per-prompt acceptances, cost-curve standard
errors) and its measured speed-ups, so its 90 % prediction intervals
(:func:`realrun.side_by_side.method_intervals`, held-out prompts as the run had) can be
drawn again when the bootstrap changes. The points do not move (the same exact EWIF of the
same model set); only the intervals and whether each measurement falls inside do.

Prints, per sd/csd method, the measured speed-up, the point and the interval the file
holds and the recomputed interval; then the coverage before and after. ``--write`` stores
the recomputed ``metadata.prediction_intervals`` and ``metadata.interval_coverage`` in the
files (nothing else changes) and records ``metadata.intervals_recomputed`` (what and why).

Run: ``.venv/bin/python benchmarks/reinterval.py [FILE ...] [--write]``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from ewif import results as results_io
from ewif.io import ModelSet
from realrun.side_by_side import interval_coverage, method_intervals

DATA = Path(__file__).resolve().parent.parent / "realrun" / "data"
REASON = (
    "intervals recomputed from the stored model set by benchmarks/reinterval.py: the unit "
    "(one AR token) is drawn with its own normal, apart from the target's passes "
    "(ewif.bootstrap); the measurement and the points are the run's"
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path)
    p.add_argument("--write", action="store_true", help="store the recomputed intervals")
    args = p.parse_args(argv)
    files = args.files or sorted(DATA.glob("cpu_results_*.json"))
    hits = {"before": [], "after": []}
    for path in files:
        run = results_io.load(path)
        stored = run.metadata.get("model_set")
        if stored is None or not run.metadata.get("prediction_intervals"):
            print(f"{path.name}: no model set or no intervals, skipped")
            continue
        model_set = ModelSet.from_dict(stored, str(path))
        old = run.metadata["prediction_intervals"]
        new = method_intervals(run, model_set)
        print(path.name)
        for name, iv in new.items():
            was = old.get(name, {})
            print(
                f"  {name:<24} measured {run.method(name).speedup:.3f}x  point "
                f"{iv['point']:.3f}x  was [{was.get('low', float('nan')):.3f}, "
                f"{was.get('high', float('nan')):.3f}] {'in' if was.get('inside') else 'OUT'}"
                f"  now [{iv['low']:.3f}, {iv['high']:.3f}] {'in' if iv['inside'] else 'OUT'}"
            )
            hits["before"].append(bool(was.get("inside")))
            hits["after"].append(iv["inside"])
        if args.write:
            metadata = dict(run.metadata)
            metadata.update(
                prediction_intervals=new,
                interval_coverage=interval_coverage(new),
                intervals_recomputed=REASON,
            )
            results_io.save(replace(run, metadata=metadata), path)
    for when, inside in hits.items():
        if inside:
            print(f"coverage {when}: {sum(inside)}/{len(inside)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
