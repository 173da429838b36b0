"""The shipped results files agree with the current code: every sd/csd prediction is the
exact EWIF of the file's own model set on the generations the method made (Theorem FL), and
every stored 90 % interval is the one ``ewif.predict.bootstrap`` draws from it today
(``benchmarks/repredict.py`` rewrites them when the theory changes)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ewif.files import results as results_io
from ewif.files.model_set import ModelSet
from ewif.files.tree_config import TreeConfig
from ewif.files.tree_models import tree_cascade
from realrun.pipeline import timing_diagnostics
from realrun.predictions import (
    is_tree_config,
    method_intervals,
    method_lengths,
    replay_predictions,
)
from realrun.results_tables import format_results
from realrun.run_context import context_predictions

DATA = Path(__file__).resolve().parents[2] / "realrun" / "data"
TREE_RUNS = sorted(DATA.glob("trees_*.json"))
RUNS = sorted(DATA.glob("cpu_results_*.json")) + TREE_RUNS

#: Largest target logit gap at which a greedy output may differ from AR's: a near-tie of
#: bfloat16 / quantized kernels (one bfloat16 step at logits of 16-64 is 0.125-0.5).
NEAR_TIE = 0.5


def test_there_are_shipped_runs():
    assert len(RUNS) >= 10


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_predictions_and_intervals_are_the_current_codes(path):
    run = results_io.load(path)
    model_set = ModelSet.from_dict(run.metadata["model_set"], str(path))
    for m in run.methods:
        if m.kind in ("sd", "csd"):
            cascade = (
                tree_cascade(model_set, TreeConfig.from_dict(m.config))
                if is_tree_config(m.config)
                else model_set.to_cascade(
                    m.config["models"], np.array(m.config["K"]), m.config["lenience"]
                )
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
    # the report's AR line gives the unit the run was priced in (moved by c(m, L) or not)
    assert f"({100 * (1 / (1 + now['ar_agreement']['error']) - 1):+.1f}%)" in report


@pytest.mark.parametrize("path", TREE_RUNS, ids=lambda p: p.stem)
def test_tree_runs_are_complete_and_lossless(path):
    """A shipped token-tree run (issue 33): the tree search's decision and the tree-pass
    timing are recorded, its tree methods ran side by side with AR and the best chain, each
    with a 90 % interval, on held-out prompts spanning the task categories with some held
    out whole, the CPU recorded; greedy outputs equal AR's except near-ties (a divergence at
    a target logit gap of at most :data:`NEAR_TIE`, reported with its gap)."""
    run = results_io.load(path)
    meta = run.metadata
    assert not meta["interrupted"]
    assert meta["cpu"]["model"] and "/" not in str(meta.get("prompt_set"))
    assert meta["tree_recommendation"] and meta["tree_pass_timing"]
    assert set(meta["held_out_categories"]) <= set(meta["held_out_prompt_categories"])
    assert not set(meta["held_out_categories"]) & set(meta["measuring_prompt_categories"])
    assert len(set(meta["held_out_prompt_categories"])) >= 6
    trees = [m for m in run.methods if is_tree_config(m.config)]
    assert trees and any(m.kind == "autoregressive" for m in run.methods)
    assert all(m.name in meta["prediction_intervals"] for m in trees)
    for d in meta.get("divergences", []):
        assert d["logit_gap"] is not None and abs(d["logit_gap"]) <= NEAR_TIE, d


@pytest.mark.parametrize("path", TREE_RUNS, ids=lambda p: p.stem)
def test_context_predictions_skip_trees_and_survive_a_bad_fit(path):
    """Context predictions are the current code's (chains only: a tree is priced at one
    curve), and a context fit that prices an AR token at <= 0 somewhere on the held-out
    prompts leaves those methods refused, with the reason, instead of losing the run."""
    run = results_io.load(path)
    model_set = ModelSet.from_dict(run.metadata["model_set"], str(path))
    tokens = run.metadata["held_out_context_tokens"]
    now = context_predictions(run, model_set, tokens)
    assert now == run.metadata["context_predictions"]
    assert not any(is_tree_config(m.config) and m.name in now for m in run.methods)
    if model_set.context_cost is None:
        return
    steep = replace(model_set.context_cost, ar_slope=1.0, ar_tokens=max(tokens) + 10.0)
    bad = context_predictions(run, replace(model_set, context_cost=steep), tokens)
    assert bad and all(v["point"] is None and "not admit" in v["refused"] for v in bad.values())
