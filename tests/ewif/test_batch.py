"""Batch-aware SD (ewif.batch): B = 1 is today's EWIF, a hand-computed B = 2 case, the
Monte Carlo witness with independent rows (simulate.batch) up to B = 8, the schedule against
brute force, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ewif import io
from ewif.batch import batch_ratio, best_draft_lengths, is_proposer, schedule
from ewif.cascade import Cascade
from simulate.batch import simulate_batch_sd

# A target whose batched pass gets dearer with total positions, as on a CPU: nearly flat for
# a few positions, then steeper (m = 1..48).
TARGET = np.concatenate([[1.0, 1.04, 1.08, 1.12], 1.12 + 0.06 * np.arange(1, 45)])
DRAFT = 0.2 * TARGET
ALPHA = {"d": 0.75, "mag": 0.35}


def model_set() -> io.ModelSet:
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[0, 2], alpha[1, 2] = ALPHA["d"], ALPHA["mag"], 0.4
    return io.ModelSet(
        models=("t", "d", "mag"),
        cost=np.array([1.0, DRAFT[0], 0.002]),
        cost_per_token=np.zeros(3),
        alpha={1.0: alpha},
        cost_curve=(TARGET, DRAFT, np.array([0.002])),
        catch_up=(False, True, False),
        metadata={"timing": {"t": {"m": [1]}, "d": {"m": [1]}, "mag": {"seconds_per_token": 1e-5}}},
    )


@pytest.mark.parametrize("drafter", ["d", "mag"])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_batch_one_is_todays_ewif(drafter, k):
    ms = model_set()
    flags = [False, drafter == "d"]
    sd = Cascade.from_model_set(ms, ["t", drafter], [[k]], catch_up=flags)
    assert batch_ratio(ms, drafter, k, 1) == pytest.approx(sd.ewif(), rel=1e-12)
    if drafter == "d":
        plain = Cascade.from_model_set(ms, ["t", "d"], [[k]], catch_up=[False, False]).ewif()
        assert batch_ratio(ms, "d", k, 1, catch_up=False) == pytest.approx(plain, rel=1e-12)


def test_two_rows_by_hand():
    ms, a = model_set(), ALPHA["d"]
    c0, cd = TARGET, DRAFT  # c(m) = curve[m - 1]
    first = (1 - a) ** 2 * cd[1] + 2 * a * (1 - a) * cd[2] + a * a * cd[3]
    assert batch_ratio(ms, "d", 1, 2) == pytest.approx((1 + a) * c0[1] / (c0[3] + first))
    # k = 2, no catch-up: two passes over 2 positions, target over 6
    tokens = 1 + a + a * a
    assert batch_ratio(ms, "d", 2, 2, catch_up=False) == pytest.approx(
        tokens * c0[1] / (c0[5] + 2 * cd[1])
    )
    assert batch_ratio(ms, "mag", 3, 4) == pytest.approx(
        (1 - ALPHA["mag"] ** 4) / (1 - ALPHA["mag"]) * c0[3] / (c0[15] + 3 * 4 * 0.002)
    )


@pytest.mark.parametrize(
    ("drafter", "k", "batch", "catch_up", "visible"),
    [
        ("d", 1, 1, True, False),
        ("d", 3, 2, True, False),
        ("d", 2, 4, True, True),
        ("d", 1, 8, True, True),
        ("d", 4, 8, True, False),
        ("d", 3, 8, False, False),
        ("mag", 2, 4, False, False),
        ("mag", 5, 8, False, False),
    ],
)
def test_exact_ratio_matches_the_row_by_row_witness(drafter, k, batch, catch_up, visible):
    ms = model_set()
    exact = batch_ratio(ms, drafter, k, batch, catch_up=catch_up)
    est = simulate_batch_sd(ms, drafter, k, batch, steps=20_000, catch_up=catch_up, seed=k + batch)
    assert est.contains(exact), (exact, est)
    if visible:  # where the catch-up costs > 6 standard errors the witness must tell it apart
        assert not est.contains(batch_ratio(ms, drafter, k, batch, catch_up=False))


def test_best_draft_lengths_and_schedule_against_brute_force():
    ms = model_set()
    sizes = [1, 2, 3, 4, 6, 8, 12, 16]
    choices = best_draft_lengths(ms, "d", sizes, k_max=8)
    for c in choices:
        ratios = {k: batch_ratio(ms, "d", k, c.batch) for k in range(9)}
        best = max(ratios.values())
        assert c.ratio == best and c.k == min(k for k, r in ratios.items() if r == best)
    ks = [c.k for c in choices]
    assert ks[0] >= 1 and ks == sorted(ks, reverse=True)  # longer drafts pay less as B grows
    assert 0 in ks  # at large batch the target's pass is too dear: do not speculate
    ranges = schedule(choices)
    assert [r.k for r in ranges] == [k for i, k in enumerate(ks) if i == 0 or ks[i - 1] != k]
    assert ranges[0].low == 1 and ranges[-1].high == 16
    covered = [b for r in ranges for b in sizes if r.low <= b <= r.high]
    assert covered == sizes


def test_bad_input():
    ms = model_set()
    with pytest.raises(ValueError, match="drafter must be one of the drafters"):
        batch_ratio(ms, "t", 1, 1)
    with pytest.raises(ValueError, match="batch must be"):
        batch_ratio(ms, "d", 1, 0)
    with pytest.raises(ValueError, match="k must be"):
        batch_ratio(ms, "d", -1, 1)
    with pytest.raises(ValueError, match="'mag' is a proposer"):
        batch_ratio(ms, "mag", 1, 2, catch_up=True)
    with pytest.raises(ValueError, match="unknown model"):
        batch_ratio(ms, "x", 1, 2)
    with pytest.raises(ValueError, match="at least one batch size"):
        best_draft_lengths(ms, "d", [])
    assert batch_ratio(ms, "d", 0, 4) == 1.0 and is_proposer(ms, "mag") and not is_proposer(ms, "d")


def test_recommend_prints_the_batch_schedule(tmp_path, capsys):
    import json

    from ewif import cli

    path = io.save(model_set(), tmp_path / "set.json")
    assert cli.main(["recommend", "--from", str(path), "--batch-sizes", "1,2,4,16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["batch_schedule"]
    assert [c["batch"] for c in out["d"]["by_batch"]] == [1, 2, 4, 16]
    first = out["d"]["by_batch"][0]
    assert first["ratio"] == pytest.approx(batch_ratio(model_set(), "d", first["k"], 1))
    assert cli.main(["recommend", "--from", str(path), "--batch-sizes", "1,x"]) == 2
    assert "--batch-sizes must be" in capsys.readouterr().err
    assert cli.main(["recommend", "--from", str(path), "--batch-sizes", "1,5000"]) == 2
    assert cli.main(["recommend", "--from", str(path), "--batch-sizes", "1,4"]) == 0
    assert "batch-aware plain SD with d: B=1" in capsys.readouterr().out
