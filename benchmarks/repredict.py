"""Recompute the predictions and intervals of real runs with the current ``ewif``.

No model runs: every results file (default: the shipped ``realrun/data/cpu_results_*.json``;
or the files given) carries its model set (acceptances, per-prompt acceptances, cost curves
and their standard errors) and its measurements, so each sd/csd method's prediction — the
exact EWIF on the generations it made (Theorem FL, :func:`realrun.predictions.method_lengths`)
— and its 90 % prediction interval (:func:`realrun.predictions.method_intervals`, held-out
prompts as the run had) can be computed again when the theory changes. The measurements do
not move.

Prints, per sd/csd method, the measured speed-up, the prediction the file holds and the
recomputed one with its interval, and, where the model set carries acceptance traces, what
replaying them predicts (:func:`realrun.predictions.replay_predictions`); then the median
error and the coverage before, after and by replay.
``--write`` stores the recomputed ``predicted_speedup``, ``metadata.prediction_intervals``,
``metadata.interval_coverage``, ``metadata.median_prediction_error`` and the replay's
``metadata.replay_predictions`` and ``metadata.replay_coverage`` in the files, the timing
diagnostics ``metadata.timing_agreement`` and ``metadata.ar_agreement`` as the current code
computes them from the run's stored pass times (:func:`realrun.pipeline.timing_diagnostics`),
and records ``metadata.predictions_recomputed`` (what and why); nothing else changes (the "cost
model alone" figures need the run's in-run acceptances and keep the endless EWIF of a file
that predates Theorem FL).

Run: ``.venv/bin/python benchmarks/repredict.py [FILE ...] [--write]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from ewif.files import results as results_io
from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from ewif.files.tree_config import TreeConfig
from ewif.files.tree_models import tree_cascade
from realrun.pipeline import median_prediction_error, timing_diagnostics
from realrun.predictions import (
    interval_coverage,
    is_tree_config,
    method_intervals,
    method_lengths,
    replay_predictions,
)

DATA = Path(__file__).resolve().parent.parent / "realrun" / "data"
REASON = (
    "predictions and intervals recomputed from the stored model set by "
    "benchmarks/repredict.py: each is the exact EWIF of the generations the method made "
    "(Theorem FL: the last step of a generation pays for tokens it cannot keep), each "
    "interval for the run's held-out prompts by category where the run recorded them (a "
    "category the measuring prompts never saw drawn as a category); "
    "lengths: {lengths}; the measurements are the run's"
)


def repredicted(run: Results, model_set: ModelSet) -> Results:
    """``run`` with every sd/csd prediction recomputed on its generations' lengths."""
    methods = []
    for m in run.methods:
        if m.kind in ("sd", "csd"):
            cascade = (
                tree_cascade(model_set, TreeConfig.from_dict(m.config))
                if is_tree_config(m.config)
                else model_set.to_cascade(
                    m.config["models"], np.array(m.config["K"]), m.config["lenience"]
                )
            )
            m = replace(m, predicted_speedup=cascade.ewif(method_lengths(run, m.name)))
        methods.append(m)
    return replace(run, methods=methods)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path)
    p.add_argument("--write", action="store_true", help="store the recomputed predictions")
    args = p.parse_args(argv)
    files = args.files or sorted(DATA.glob("cpu_results_*.json"))
    errors: dict[str, list[float]] = {"before": [], "after": [], "replay": []}
    hits: dict[str, list[bool]] = {"before": [], "after": [], "replay": []}
    for path in files:
        run = results_io.load(path)
        stored = run.metadata.get("model_set")
        if stored is None or not run.metadata.get("prediction_intervals"):
            print(f"{path.name}: no model set or no intervals, skipped")
            continue
        model_set = ModelSet.from_dict(stored, str(path))
        new_run = repredicted(run, model_set)
        old = run.metadata["prediction_intervals"]
        new = method_intervals(new_run, model_set)
        print(path.name)
        for name, iv in new.items():
            was, now = run.method(name), new_run.method(name)
            print(
                f"  {name:<40} measured {was.speedup:.3f}x  was {was.predicted_speedup:.3f}x "
                f"({was.prediction_error:.1%}) {'in' if old[name]['inside'] else 'OUT'}  now "
                f"{now.predicted_speedup:.3f}x ({now.prediction_error:.1%}) "
                f"[{iv['low']:.3f}, {iv['high']:.3f}] {'in' if iv['inside'] else 'OUT'}"
            )
            errors["before"].append(was.prediction_error)
            errors["after"].append(now.prediction_error)
            hits["before"].append(bool(old[name]["inside"]))
            hits["after"].append(iv["inside"])
        replays = {}
        if model_set.bootstrap.acceptance_traces is not None:
            replays = replay_predictions(new_run, model_set)
            for name, v in replays.items():
                print(
                    f"  {name:<40} trace replay {v['point']:.3f}x ({v['error']:.1%}) "
                    f"[{v['low']:.3f}, {v['high']:.3f}] {'in' if v['inside'] else 'OUT'}"
                )
                errors["replay"].append(v["error"])
                hits["replay"].append(v["inside"])
        if args.write:
            recorded = "generation_lengths" in run.metadata
            metadata = dict(run.metadata)
            metadata.pop("intervals_recomputed", None)
            if replays:
                metadata.update(
                    replay_predictions=replays, replay_coverage=interval_coverage(replays)
                )
            metadata.update(
                prediction_intervals=new,
                interval_coverage=interval_coverage(new),
                median_prediction_error=median_prediction_error(new_run),
                **timing_diagnostics(new_run, model_set),
                predictions_recomputed=REASON.format(
                    lengths="as the run recorded them"
                    if recorded
                    else "not recorded by the run: the even split of each method's tokens "
                    "over its prompts"
                ),
            )
            results_io.save(replace(new_run, metadata=metadata), path)
    for when in ("before", "after", "replay"):
        if errors[when]:
            print(
                f"{when}: median error {statistics.median(errors[when]):.1%}, "
                f"coverage {sum(hits[when])}/{len(hits[when])}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
