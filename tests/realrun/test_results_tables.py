"""The report of a run: one renderer per section over the typed metadata, and old files read
through the one adapter (:func:`ewif.files.run_metadata.run_metadata`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ewif.files import results as results_io
from ewif.files.run_metadata import run_metadata
from realrun import results_tables as tables
from realrun.model_set_tables import row_cost_lines

DATA = Path(__file__).resolve().parents[2] / "realrun" / "data"


def _old_metadata() -> dict:
    """Metadata as files before the AR unit, the mean pass time, held-out intervals and the
    priced mean wrote it."""
    return {
        "model_set": {
            "models": ["t", "d"],
            "metadata": {
                "target_one_token_pass_s": 0.1,
                "timing": {"t": {"m": [1, 2, 3], "seconds": [0.1, 0.12, 0.14]}},
            },
        },
        "in_run_pass_seconds": {"CSD": {"t": {"2": {"passes": 40, "median_s": 0.125}}}},
        "prediction_intervals": {
            "CSD": {"point": 1.5, "low": 1.2, "high": 1.8, "level": 0.9, "inside": True}
        },
        "timing_agreement": {
            "t": {"2": {"passes": 40, "run_mean_s": 0.125, "timed_mean_s": 0.12, "error": 0.04}}
        },
    }


def test_the_adapter_reads_old_files():
    meta = run_metadata(_old_metadata())
    assert meta.model_set.ar_reference.kind == "pass"
    assert meta.model_set.ar_reference.seconds == 0.1
    assert meta.in_run_passes["CSD"]["t"]["2"].statistic == "median"
    assert meta.intervals["CSD"].held_out_prompts is None
    assert meta.timing_gaps[0].priced_mean_s == 0.12
    assert meta.recommendation is None and meta.divergences == [] and not meta.interrupted


def test_old_files_render_with_their_own_words():
    ar = results_io.MethodResult("AR", "autoregressive", 8.0, None)
    csd = results_io.MethodResult("CSD", "csd", 12.0, None, 1.5)
    run = results_io.Results(
        "cpu", "f", 4, 8, {"temperature": 0.0, "top_p": 1.0},
        results_io.with_speedups([ar, csd]), _old_metadata(),
    )  # fmt: skip
    report = tables.format_results(run)
    assert "the measured one-token pass of the target (100.0 ms)" in report
    assert "CSD: target passes in the run, median: m=2 125.0 ms (timed 120.0)" in report
    assert "(90% bootstrap over measuring prompts; measured inside)" in report
    assert "largest gap +4.0% (t, m=2: 125.0 vs 120.0 ms, 40 passes)" in report


@pytest.mark.parametrize("path", sorted(DATA.glob("cpu_results_*.json")), ids=lambda p: p.stem)
def test_every_section_renders_every_shipped_run(path):
    run = results_io.load(path)
    lines = [line for section in tables.SECTIONS for line in section(run, run.meta)]
    assert tables.format_results(run) == "\n".join(lines)
    assert lines[1].startswith(run.family) and lines[-1] == tables.TERMS


@pytest.mark.parametrize("path", sorted(DATA.glob("cpu_results_*.json")), ids=lambda p: p.stem)
def test_the_report_leads_with_one_decision_that_the_table_bears_out(path):
    """The first line decides, once, with the numbers of the table's row of the method it
    names: run the fastest of our methods when it beat AR, else decode autoregressively."""
    run = results_io.load(path)
    lines = tables.format_results(run).splitlines()
    ours = [m for m in run.methods if m.kind in ("sd", "csd")]
    fastest = max(ours, key=lambda m: m.speedup)
    first = lines[0]
    assert first.startswith("decision: ") and sum(x.startswith("decision") for x in lines) == 1
    assert fastest.name in first
    assert first.startswith(f"decision: run {fastest.name}") == (fastest.speedup > 1)
    (row,) = [x for x in lines if x.startswith(f"{fastest.name} ") and "  " in x]
    for number in (f"{fastest.speedup:.3f}", f"{fastest.predicted_speedup:.3f}"):
        assert f"{number}x" in first and number in row


def test_a_peer_that_beat_ar_gets_a_note():
    run = results_io.load(DATA / "cpu_results_smollm2_amx.json")
    (note,) = [x for x in tables.format_results(run).splitlines() if x.startswith("note: ")]
    assert "HF prompt lookup k=10" in note and "1.096x AR, faster than AR" in note


def test_an_interval_holding_one_warns_to_measure_more_prompts():
    run = results_io.load(DATA / "reach_smollm2_rag.json")
    (held,) = run.metadata["prediction_intervals"].values()
    assert held["low"] <= 1.0 <= held["high"]  # the shipped run's one interval holds 1
    report = tables.format_results(run)
    assert f"[{held['low']:.2f}, {held['high']:.2f}] holds 1 (AR)" in report
    assert "measure more prompts" in report
    run = results_io.load(DATA / "cpu_results_qwen.json")  # [0.75, 0.93]: settled, 16 prompts
    assert "measure more prompts" not in tables.format_results(run)


def test_row_cost_lines_name_the_second_rows_step_where_priced():
    model_set = {
        "models": ["t", "d", "mag"],
        "row_cost": [0.0, 0.004, 0.0],
        "row_step": [0.0, 0.05, 0.0],
        "metadata": {
            "timing": {
                "d": {
                    "row_seconds": 0.0009,
                    "row_seconds_stderr": 0.0001,
                    "row_step_seconds": 0.0086,
                    "row_step_seconds_stderr": 0.0004,
                }
            }
        },
    }
    (line,) = row_cost_lines(model_set)
    assert line == (
        "d: one logit row costs 0.0040 AR tokens (0.90 ± 0.10 ms as timed), taken off each "
        "catch-up position (it returns none); the second row 0.0500 more (8.60 ± 0.40 ms as "
        "timed), taken off each catch-up pass returning one row"
    )
    del model_set["row_step"]  # an older file: no step, the line as before
    assert row_cost_lines(model_set)[0].endswith("(it returns none)")
