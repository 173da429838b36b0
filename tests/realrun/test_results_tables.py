"""The report of a run: one renderer per section over the typed metadata, and old files read
through the one adapter (:func:`ewif.files.run_metadata.run_metadata`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ewif.files import results as results_io
from ewif.files.run_metadata import run_metadata
from realrun import results_tables as tables

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
    assert lines[0].startswith(run.family)
