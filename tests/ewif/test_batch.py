"""Batch-aware SD (ewif.predict.batch): B = 1 is today's EWIF, a hand-computed B = 2 case, the
Monte Carlo witness with independent rows (simulate.batch) up to B = 8, the schedule against
brute force, and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ewif.files import model_set as model_io
from ewif.files.batch_costs import BatchCosts
from ewif.predict.batch import batch_ratio, best_draft_lengths, is_proposer, schedule
from simulate.batch import simulate_batch_sd

# A target whose batched pass gets dearer with total positions, as on a CPU: nearly flat for
# a few positions, then steeper (m = 1..48).
TARGET = np.concatenate([[1.0, 1.04, 1.08, 1.12], 1.12 + 0.06 * np.arange(1, 45)])
DRAFT = 0.2 * TARGET
ALPHA = {"d": 0.75, "mag": 0.35}


def model_set() -> model_io.ModelSet:
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[0, 2], alpha[1, 2] = ALPHA["d"], ALPHA["mag"], 0.4
    return model_io.ModelSet(
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
    sd = ms.to_cascade(["t", drafter], [[k]], catch_up=flags)
    assert batch_ratio(ms, drafter, k, 1) == pytest.approx(sd.ewif(), rel=1e-12)
    if drafter == "d":
        plain = ms.to_cascade(["t", "d"], [[k]], catch_up=[False, False]).ewif()
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

    path = model_io.save(model_set(), tmp_path / "set.json")
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


def batched_set() -> model_io.ModelSet:
    """The set above with measured batched curves that differ from the batch-1 curve read at
    total positions: every row's positions cost extra (attention over B caches), +2 % per
    other row and position, so a review pass pays more of it than a one-position pass."""
    per_b = {}
    for b in (1, 2, 4, 8):
        rows = [
            np.array([c[min(b * m, c.size) - 1] * (1 + 0.02 * (b - 1) * m) for m in range(1, 7)])
            for c in (TARGET, DRAFT)
        ]
        per_b[b] = (*rows, np.array([0.002]))
    return model_io.ModelSet(**{**vars(model_set()), "batch_costs": BatchCosts(per_b)})


def test_batch_costs_read_like_curves_in_m_and_linearly_in_b():
    bc = batched_set().batch_costs
    c2 = bc.curves[2][0]
    assert bc.at(0, 2, 3) == c2[2]
    assert bc.at(0, 2, 2.5) == pytest.approx((c2[1] + c2[2]) / 2)  # fractional m: linear
    assert bc.at(0, 2, 8) == pytest.approx(c2[5] + 2 * (c2[5] - c2[4]))  # beyond: last line
    assert bc.at(0, 3, 2) == pytest.approx((bc.at(0, 2, 2) + bc.at(0, 4, 2)) / 2)  # B between
    beyond = bc.at(0, 12, 1)  # beyond the largest B: the line of the last two, never down
    assert beyond == pytest.approx(bc.at(0, 8, 1) + (bc.at(0, 8, 1) - bc.at(0, 4, 1)))
    with pytest.raises(ValueError, match="m must be >= 1"):
        bc.at(0, 2, 0.5)
    back = BatchCosts.from_dict(bc.to_dict())
    assert back.to_dict() == bc.to_dict()
    with pytest.raises(ValueError, match="same number of models"):
        BatchCosts({1: (np.ones(2), np.ones(2)), 2: (np.ones(2),)})
    with pytest.raises(ValueError, match="key 'two' must be a batch size"):
        BatchCosts.from_dict({"two": [[1.0]]})


def test_batched_curves_equal_to_the_total_position_reading_change_nothing():
    """Batched curves built as c(B, m) = c(B·m) of an affine batch-1 curve give exactly the
    ratio of the batch-1 reading (fractional m included: both are linear there)."""
    line = 1.0 + 0.05 * np.arange(48)
    base = model_io.ModelSet(
        **{
            **vars(model_set()),
            "cost_curve": (line, 0.2 * line, np.array([0.002])),
            "cost": np.array([1.0, 0.2, 0.002]),
        }
    )
    per_b = {
        b: (line[b - 1 :: b][:6], 0.2 * line[b - 1 :: b][:6], np.array([0.002])) for b in (1, 2, 4)
    }
    batched = model_io.ModelSet(**{**vars(base), "batch_costs": BatchCosts(per_b)})
    for b, k in [(1, 3), (2, 2), (4, 1)]:
        assert batch_ratio(batched, "d", k, b) == pytest.approx(batch_ratio(base, "d", k, b))


def test_reevaluation_curves_price_the_one_row_pass():
    ms = batched_set()
    cheaper = {
        b: tuple(c * (0.5 if i == 1 else 1.0) for i, c in enumerate(per))
        for b, per in ms.batch_costs.curves.items()
    }
    one_row = model_io.ModelSet(
        **{**vars(ms), "batch_costs": BatchCosts(ms.batch_costs.curves, cheaper)}
    )
    bc, a = one_row.batch_costs, ALPHA["d"]
    want = (
        (1 + a + a * a)
        * bc.at(0, 2, 1)
        / (bc.at(0, 2, 3) + 2 * bc.at(1, 2, 1) + bc.at(1, 2, 3, one_output=True))
    )
    got = batch_ratio(one_row, "d", 2, 2, drafting="reevaluate")
    assert got == pytest.approx(want, rel=1e-12)
    assert got > batch_ratio(ms, "d", 2, 2, drafting="reevaluate")
    est = simulate_batch_sd(one_row, "d", 2, 4, steps=20_000, drafting="reevaluate", seed=3)
    assert est.contains(batch_ratio(one_row, "d", 2, 4, drafting="reevaluate"))
    back = model_io.ModelSet.from_dict(one_row.to_dict())
    assert back.batch_costs.reevaluate_dict() == bc.reevaluate_dict()
    with pytest.raises(ValueError, match="batch_reevaluate_curve needs batch_cost_curve"):
        model_io.ModelSet.from_dict(
            {**model_set().to_dict(), "batch_reevaluate_curve": {"1": [[1]]}}
        )
    with pytest.raises(ValueError, match="one curve per model"):
        BatchCosts(ms.batch_costs.curves, {1: (np.ones(2),)})


def test_reevaluate_drafting_by_hand_and_against_the_witness():
    """llama.cpp's server: k one-position passes per row, then one pass over the target's
    batch (B rows of k + 1)."""
    ms, a = batched_set(), ALPHA["d"]
    bc = ms.batch_costs
    tokens = 1 + a + a * a
    want = tokens * bc.at(0, 2, 1) / (bc.at(0, 2, 3) + 2 * bc.at(1, 2, 1) + bc.at(1, 2, 3))
    assert batch_ratio(ms, "d", 2, 2, drafting="reevaluate") == pytest.approx(want, rel=1e-12)
    for k, b in [(2, 2), (3, 4), (1, 8)]:
        exact = batch_ratio(ms, "d", k, b, drafting="reevaluate")
        est = simulate_batch_sd(ms, "d", k, b, steps=20_000, drafting="reevaluate", seed=b)
        assert est.contains(exact), (exact, est)
    with pytest.raises(ValueError, match="drafting must be one of"):
        batch_ratio(ms, "d", 1, 2, drafting="eager")


@pytest.mark.parametrize(("k", "batch", "catch_up"), [(2, 4, True), (1, 8, True), (3, 2, False)])
def test_witness_prices_the_batched_curves_too(k, batch, catch_up):
    ms = batched_set()
    exact = batch_ratio(ms, "d", k, batch, catch_up=catch_up)
    est = simulate_batch_sd(ms, "d", k, batch, steps=20_000, catch_up=catch_up, seed=7 * k)
    assert est.contains(exact), (exact, est)
    # and the batched curves matter: the batch-1 reading is far off at B = 8
    if batch == 8:
        assert not est.contains(batch_ratio(model_set(), "d", k, batch, catch_up=catch_up))
