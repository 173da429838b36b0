"""The shipped results files agree with the current code: every sd/csd prediction is the
exact EWIF of the file's own model set on the generations the method made (Theorem FL), and
every stored 90 % interval is the one ``ewif.predict.bootstrap`` draws from it today
(``benchmarks/repredict.py`` rewrites them when the theory changes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ewif.files import results as results_io
from ewif.files.model_set import ModelSet
from realrun.pipeline import timing_diagnostics
from realrun.predictions import method_intervals, method_lengths, replay_predictions
from realrun.results_tables import format_results

DATA = Path(__file__).resolve().parents[2] / "realrun" / "data"
RUNS = sorted(DATA.glob("cpu_results_*.json"))


def test_there_are_shipped_runs():
    assert len(RUNS) >= 10


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_predictions_and_intervals_are_the_current_codes(path):
    run = results_io.load(path)
    model_set = ModelSet.from_dict(run.metadata["model_set"], str(path))
    for m in run.methods:
        if m.kind in ("sd", "csd"):
            cascade = model_set.to_cascade(
                m.config["models"], np.array(m.config["K"]), m.config["lenience"]
            )
            lengths = method_lengths(run, m.name)
            assert m.predicted_speedup == pytest.approx(cascade.ewif(lengths), rel=1e-9), m.name
    stored, now = run.metadata["prediction_intervals"], method_intervals(run, model_set)
    assert stored.keys() == now.keys()
    for name, interval in now.items():
        kept = stored[name]
        assert kept["inside"] == interval["inside"], name
        for key in ("point", "low", "high"):
            assert kept[key] == pytest.approx(interval[key], rel=1e-9), (name, key)


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_replay_predictions_are_the_current_codes(path):
    """Where the model set carries acceptance traces, the stored trace-replay predictions
    are what :func:`realrun.predictions.replay_predictions` gives today."""
    run = results_io.load(path)
    model_set = ModelSet.from_dict(run.metadata["model_set"], str(path))
    if model_set.bootstrap.acceptance_traces is None:
        assert "replay_predictions" not in run.metadata
        return
    stored, now = run.metadata["replay_predictions"], replay_predictions(run, model_set)
    assert stored.keys() == now.keys()
    for name, v in now.items():
        assert stored[name]["inside"] == v["inside"], name
        for key in ("point", "low", "high", "error"):
            assert stored[name][key] == pytest.approx(v[key], rel=1e-9), (name, key)


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_timing_diagnostics_are_the_current_codes(path):
    """The in-run agreement compares only the passes a cost curve prices; the AR method's
    passes go against the AR reference (``metadata.ar_agreement``) and the report does not
    set them against the curve."""
    run = results_io.load(path)
    model_set = ModelSet.from_dict(run.metadata["model_set"], str(path))
    now = timing_diagnostics(run, model_set)
    assert now == {key: run.metadata[key] for key in now}  # floats survive JSON exactly
    report = format_results(run)
    assert "AR: target passes in the run" not in report
    priced = (
        [  # the report names every priced row cost, with what the harness timed
            f"{name}: one logit row costs {h:.4f} AR tokens"
            for name, h in zip(model_set.models, model_set.row_cost, strict=True)
            if h
        ]
        if model_set.row_cost is not None
        else []
    )
    assert all(line in report for line in priced)
    assert report.count("one logit row costs") == len(priced)
    assert f"({100 * (1 / (1 + now['ar_agreement']['error']) - 1):+.1f}%)" in report
