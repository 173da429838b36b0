"""realrun.categories: α per category from a measurement's per-prompt evidence, and outputs
that differ from AR counted per category."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ewif.base.resampling import HeldOut
from ewif.files import results as results_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.categories import alpha_from_rows
from ewif.files.model_set import ModelSet
from realrun.categories import (
    differing_lines,
    outputs_differing_by_category,
    with_categories,
)
from realrun.predictions import held_out_of, method_intervals
from realrun.prompts import Prompt

DATA = Path(__file__).parents[2] / "realrun" / "data"


def _set(rows: dict, **metadata) -> ModelSet:
    return ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, 0.2]),
        cost_per_token=np.zeros(2),
        alpha=alpha_from_rows(rows, 2, (1.0,)),
        bootstrap=BootstrapData(rows),
        metadata={"prompts": next(iter(rows.values())).shape[0], **metadata},
    )


def test_with_categories_splits_the_evidence_by_the_measured_prompts_categories():
    rows = {(1.0, 0, 1): np.array([[10.0, 20], [5.0, 20], [18.0, 20]])}
    prompts = [
        Prompt("a1", "x", category="a"),
        Prompt("skip", "x", category="b"),  # the target said nothing: no row
        Prompt("b1", "x", category="b"),
        Prompt("a2", "x", category="a"),
    ]
    ms = with_categories(_set(rows, skipped_prompts=[1]), prompts)
    assert ms.categories.names == ("a", "b")
    assert ms.categories["a"].prompts == ("a1", "a2")
    assert ms.categories["a"].alpha[1.0][0, 1] == pytest.approx(28 / 40)
    assert ms.categories["b"].alpha[1.0][0, 1] == pytest.approx(5 / 20)
    with pytest.raises(ValueError, match="holds 3 measured prompts, but 2"):
        with_categories(_set(rows), prompts[:2])


def test_with_categories_leaves_a_set_without_per_prompt_evidence_as_it_is():
    ms = replace(_set({(1.0, 0, 1): np.array([[1.0, 2], [1.0, 2]])}), bootstrap=None)
    assert with_categories(ms, [Prompt("a", "x")]) is ms


def test_outputs_differing_from_ar_are_counted_per_category_of_the_held_out_prompts():
    run = results_io.load(DATA / "cpu_results_qwen_amx.json")
    by_category = outputs_differing_by_category(run)
    meta = run.metadata
    for name, total in meta["outputs_differing_from_AR"].items():
        assert sum(d for d, _ in by_category[name].values()) == total
        assert sum(n for _, n in by_category[name].values()) == run.prompts
    assert set(by_category["AR"]) == {"math", "mc", "code"}
    lines = differing_lines(by_category)
    assert lines and all("AR:" not in line for line in lines)


def test_recorded_categories_are_used_and_a_run_without_the_comparison_has_none():
    run = results_io.load(DATA / "cpu_results_smollm2.json")
    meta = copy.deepcopy(run.metadata)
    meta["held_out_prompt_categories"] = ["rag"] * run.prompts
    by_category = outputs_differing_by_category(replace(run, metadata=meta))
    differing = meta["outputs_differing_from_AR"]["CSD mag [[1]]"]
    assert differing > 0
    assert by_category["CSD mag [[1]]"] == {"rag": (differing, run.prompts)}
    del meta["divergences"]
    assert outputs_differing_by_category(replace(run, metadata=meta)) == {}


def test_the_report_shows_alpha_per_category_and_differences_by_category():
    from realrun.prompts import load_prompts
    from realrun.results_tables import format_results

    run = results_io.load(DATA / "cpu_results_qwen_amx.json")
    by_id = {p.id: p for p in load_prompts("all")}
    measured = ModelSet.from_dict(run.metadata["model_set"], "run")
    measuring = [by_id[i] for i in run.metadata["measuring_prompt_ids"]]
    meta = {
        **run.metadata,
        "model_set": with_categories(measured, measuring).to_dict(),
        "held_out_categories": ["code"],
    }
    text = format_results(replace(run, metadata=meta))
    assert "α per category (measuring prompts" in text
    assert "held out whole (absent from the measuring split): code" in text
    assert "outputs differing from AR, by category:" in text
    assert "α per category" not in format_results(run)  # a run measured before categories


def test_peer_comparison_names_the_fastest_peer_and_prices_its_schedules_at_our_costs():
    from realrun.peers import peer_comparison
    from realrun.results_tables import format_results

    run = results_io.load(DATA / "cpu_results_qwen.json")
    out = peer_comparison(run)
    assert out["peer"] == "HF assisted qwen-0.5b" and out["ours"] == "CSD qwen-0.5b [[1]]"
    assert out["peer_won"] is False and out["ours_speedup"] > out["peer_speedup"]
    prices = out["schedules_at_our_costs"]
    assert list(prices) == [
        "fixed k=1",
        "heuristic from 5",
        "heuristic_transient from 5",
        "constant from 20",
    ]
    assert prices["fixed k=1"] == max(prices.values())
    ar = run.autoregressive.tokens_per_s
    won = replace(
        run,
        methods=[
            replace(m, speedup=2.0, tokens_per_s=2.0 * ar) if m.kind == "hf-assisted" else m
            for m in run.methods
        ],
    )
    assert peer_comparison(won)["peer_won"] is True
    line = "peer: HF assisted qwen-0.5b (0.666x) did not beat our fastest speculative method"
    assert line in format_results(run)
    report = format_results(won).splitlines()
    won_line = "peer: HF assisted qwen-0.5b (2.000x) beat our fastest"
    assert any(r.startswith(won_line) for r in report)
    assert any("none beats our fixed k=1" in r for r in report)
    only_ours = replace(run, methods=[m for m in run.methods if not m.kind.startswith("hf-")])
    assert peer_comparison(only_ours) is None


def test_a_runs_intervals_draw_its_unseen_categories_as_categories():
    run = results_io.load(DATA / "cpu_results_smollm2_xeon_open.json")
    model_set = ModelSet.from_dict(run.metadata["model_set"], "run")
    held = held_out_of(run, model_set)
    assert isinstance(held, HeldOut) and held.prompts == run.prompts == 24
    assert held.unseen == {"writing": 3, "translation": 3, "summary": 3}
    (interval,) = method_intervals(run, model_set).values()
    assert interval["unseen_categories"] == held.unseen
    # a run that did not record its splits' categories: the count, as before
    meta = {k: v for k, v in run.metadata.items() if k != "measuring_prompt_categories"}
    assert held_out_of(replace(run, metadata=meta), model_set) == 24
    older = results_io.load(DATA / "cpu_results_qwen.json")
    older_set = ModelSet.from_dict(older.metadata["model_set"], "run")
    assert held_out_of(older, older_set) == older.prompts
    assert all("unseen_categories" not in v for v in method_intervals(older, older_set).values())
