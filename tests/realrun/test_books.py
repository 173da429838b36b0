"""The wall-time books (realrun.books): pass summaries, the split and its flag, timing
statistics, the in-run agreement, bad input (the split of a real run on the tiny family:
tests/realrun/test_side_by_side.py)."""

from __future__ import annotations

import copy
import math

import pytest

from realrun import books
from realrun.pass_timing import PassTiming


def test_pass_summary_and_its_bad_input():
    s = books.PassSummary.of([0.1, 0.2, 0.3, 1.0])
    assert (s.count, s.total_s) == (4, pytest.approx(1.6))
    assert s.mean_s == pytest.approx(0.4) and s.median_s == pytest.approx(0.25)
    assert s.mean_s > s.median_s  # a heavy tail: the mean is what a run pays
    for bad in ([], [0.1, -0.2], [math.nan]):
        with pytest.raises(ValueError, match="pass times must be"):
            books.PassSummary.of(bad)


def test_split_flags_an_unexplained_residual_and_rejects_bad_seconds():
    b = books.split(1.0, ["t", "mag"], [True, False], {"t": {2: [0.4, 0.4]}}, [0.85, 0.05], 0.02)
    assert b.residual_s == pytest.approx(1.0 - 0.8 - 0.05 - 0.05 - 0.02)
    assert b.call_overhead_s == {"t": pytest.approx(0.05)} and b.flagged
    ok = books.split(1.0, ["t"], [True], {"t": {1: [0.98]}}, [0.99], 0.0)
    assert not ok.flagged
    with pytest.raises(ValueError, match="wall_s must be a finite number"):
        books.split(math.nan, ["t"], [True], {}, [0.0], 0.0)
    with pytest.raises(ValueError, match=r"call_seconds\[0\] must be"):
        books.split(1.0, ["t"], [True], {}, [-1.0], 0.0)
    with pytest.raises(ValueError, match="one entry per model"):
        books.split(1.0, ["t", "d"], [True], {}, [0.0], 0.0)


def test_pass_timing_keeps_mean_stderr_and_median():
    t = PassTiming.of([1, 2], [[1.0, 1.0, 4.0], [2.0, 2.0]])
    assert t.seconds == (2.0, 2.0) and t.median == (1.0, 2.0)
    assert t.stderr[0] == pytest.approx(math.sqrt(3.0) / math.sqrt(3)) and t.stderr[1] == 0.0
    assert t.to_dict()["stderr_seconds"] == list(t.stderr)
    with pytest.raises(ValueError, match="m = 2 must be a non-empty"):
        PassTiming.of([1, 2], [[1.0], [-1.0]])
    with pytest.raises(ValueError, match="one list of pass times per m"):
        PassTiming.of([1, 2], [[1.0]])


def test_timing_agreement_pools_methods_and_compares_with_the_timed_grid():
    from realrun.books import timing_agreement

    in_run = {
        "A": {"t": {"2": {"passes": 20, "mean_s": 0.11}, "5": {"passes": 10, "mean_s": 1.0}}},
        "B": {
            "t": {"2": {"passes": 30, "mean_s": 0.12}},
            "d": {"1": {"passes": 40, "mean_s": 0.05}},
        },
    }
    timing = {"t": {"m": [1, 3], "seconds": [0.1, 0.12]}, "d": {"m": [1], "seconds": [0.04]}}
    got = timing_agreement(in_run, timing)
    run = (20 * 0.11 + 30 * 0.12) / 50
    assert got["t"]["2"]["passes"] == 50 and got["t"]["2"]["run_mean_s"] == pytest.approx(run)
    assert got["t"]["2"]["timed_mean_s"] == pytest.approx(0.11)  # interpolated on the grid
    assert got["t"]["2"]["error"] == pytest.approx(run / 0.11 - 1)
    assert "5" not in got["t"]  # too few passes (and beyond the grid)
    assert got["d"]["1"]["error"] == pytest.approx(0.25)
    assert "relative_error" not in got["d"]["1"]
    assert timing_agreement(in_run, {}) == {}
    # the run 25 % slower than the measuring phase, its AR too: no gap in AR-token units
    drift = timing_agreement(in_run, timing, run_ar_s=0.0625, timed_ar_s=0.05)
    assert drift["d"]["1"]["error"] == pytest.approx(0.25)
    assert drift["d"]["1"]["relative_error"] == pytest.approx(0.0, abs=1e-12)


def test_timing_agreement_leaves_out_the_passes_the_ar_reference_prices():
    in_run = {
        "AR": {"t": {"1": {"passes": 60, "mean_s": 0.08}}},
        "SD": {"t": {"1": {"passes": 40, "mean_s": 0.1}, "2": {"passes": 40, "mean_s": 0.2}}},
    }
    timing = {"t": {"m": [1, 2], "seconds": [0.1, 0.2]}}
    pooled = books.timing_agreement(in_run, timing)
    assert pooled["t"]["1"]["passes"] == 100
    assert pooled["t"]["1"]["error"] == pytest.approx((60 * 0.08 + 40 * 0.1) / 100 / 0.1 - 1)
    got = books.timing_agreement(in_run, timing, priced_by_ar=["AR"])
    assert got["t"]["1"] == {
        "passes": 40,
        "run_mean_s": pytest.approx(0.1),
        "timed_mean_s": pytest.approx(0.1),
        "error": pytest.approx(0.0, abs=1e-12),
    }
    assert books.timing_agreement(in_run, timing, priced_by_ar=["AR", "SD"]) == {}


def test_ar_agreement_and_its_bad_input():
    got = books.ar_agreement(0.0625, 0.05)
    assert got == {
        "run_s_per_token": 0.0625,
        "timed_s_per_token": 0.05,
        "error": pytest.approx(0.25),
    }
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="run_ar_s must be a finite number of seconds > 0"):
            books.ar_agreement(bad, 0.05)
    with pytest.raises(TypeError, match="timed_ar_s must be a number of seconds"):
        books.ar_agreement(0.05, "0.05")


def test_timing_agreement_prices_the_runs_logit_rows():
    """A catch-up drafter's in-run passes are set against the timed all-rows pass less the
    priced row cost of the rows they did not return; without a row cost, the timed pass."""
    in_run = {
        "CSD": {
            "t": {"3": {"passes": 40, "mean_s": 0.3, "rows": 3.0}},
            "d": {"3": {"passes": 40, "mean_s": 0.055, "rows": 1.5}},
        }
    }
    timing = {
        "t": {"m": [1, 3], "seconds": [0.1, 0.3]},
        "d": {"m": [1, 3], "seconds": [0.04, 0.0625]},
    }
    got = books.timing_agreement(in_run, timing, 0.1, 0.1, row_seconds={"d": 0.005})
    drafter = got["d"]["3"]
    assert drafter["run_rows"] == 1.5
    assert drafter["priced_mean_s"] == pytest.approx(0.0625 - 0.005 * 1.5)
    assert drafter["error"] == pytest.approx(0.0, abs=1e-12)
    assert drafter["relative_error"] == pytest.approx(0.0, abs=1e-12)
    target = got["t"]["3"]
    assert target["run_rows"] == 3.0 and "priced_mean_s" not in target
    # a row step s is taken off the share of passes that returned one row (here a half)
    in_run["CSD"]["d"]["3"]["one_row_share"] = 0.5
    stepped = books.timing_agreement(
        in_run, timing, 0.1, 0.1, row_seconds={"d": 0.005}, step_seconds={"d": 0.008}
    )["d"]["3"]
    assert stepped["priced_mean_s"] == pytest.approx(0.0625 - 0.005 * 1.5 - 0.008 * 0.5)
    unpriced = books.timing_agreement(in_run, timing)["d"]["3"]
    assert (
        unpriced["error"] == pytest.approx(0.055 / 0.0625 - 1) and "priced_mean_s" not in unpriced
    )


def test_timing_agreement_takes_each_size_at_the_context_its_passes_ran_after():
    # The drafter's 3-position passes (catch-ups after an accepted Max-Gram token) ran after
    # ~700 cached tokens, its 1-position passes after ~100; a pass costs 0.05 ms more per
    # cached token. One context for all sizes misses the 3-position passes by ~40 %; each
    # size at its own mean context (pooled over methods, weighted by passes) agrees.
    def at(model, m, length):
        return {1: 0.04, 3: 0.06}[m] + 5e-5 * (length - 100)

    in_run = {
        "A": {"d": {"1": {"passes": 60, "mean_s": at("d", 1, 100), "mean_context": 100.0}}},
        "B": {
            "d": {
                "1": {"passes": 40, "mean_s": at("d", 1, 100), "mean_context": 100.0},
                "3": {"passes": 20, "mean_s": at("d", 3, 600), "mean_context": 600.0},
            }
        },
        "C": {"d": {"3": {"passes": 20, "mean_s": at("d", 3, 800), "mean_context": 800.0}}},
    }
    timing = {"d": {"m": [1, 3], "seconds": [0.04, 0.06]}}
    one_curve = books.timing_agreement(in_run, timing)["d"]
    assert one_curve["3"]["error"] == pytest.approx(0.09 / 0.06 - 1)
    assert "run_context" not in one_curve["3"]
    own = books.timing_agreement(in_run, timing, timed_at=at)["d"]
    assert own["3"]["run_context"] == pytest.approx(700.0)
    assert own["3"]["timed_mean_s"] == pytest.approx(0.09)
    assert own["3"]["error"] == pytest.approx(0.0, abs=1e-12)
    assert own["1"]["run_context"] == pytest.approx(100.0) and own["1"]["error"] == pytest.approx(0)
    # a run that did not record its passes' contexts: the grid, as before
    bare = copy.deepcopy(in_run)
    for d in bare.values():
        for v in d["d"].values():
            del v["mean_context"]
    assert books.timing_agreement(bare, timing, timed_at=at) == {"d": one_curve}
