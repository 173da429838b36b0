"""EWIF of an N-token generation (Theorem FL, :mod:`ewif.kernel.finite_length`): closed forms, exact
enumeration of the explicit-sequence player, the Monte Carlo witness, limits, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from ewif.kernel.finite_length import (
    expected_steps,
    first_pass_leads,
    renewal_mass,
)
from ewif.kernel.pass_cost import PassCost
from simulate.fed_positions import FedPositions
from tests.ewif.test_catch_up import BRUTE, CURVES3, _curves, _More, _Script, cascades

SD_CURVES = [[1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], [0.2, 0.35, 0.4, 0.45]]


def _price(curves, row_cost=None, row_step=None):
    """The cascade's own pricing of a pass (curves extended beyond their last point; the
    logit rows it does not return at ``row_cost``, a one-row pass's step at ``row_step``)."""
    at = PassCost.from_curves(curves, row_cost=row_cost, row_step=row_step).at_rows
    return lambda i, m, rows: float(at(i, m, rows))


def _brute_force_cost(alpha, K, fill, flags, curves, n: int, row_cost=None, row_step=None):
    """Exact expected cost of one generation of ``n`` tokens: every acceptance outcome of the
    explicit-sequence player enumerated, weighted by its probability."""
    total = 0.0
    stack: list[tuple[bool, ...]] = [()]
    while stack:
        script = _Script(stack.pop())
        price = _price(curves, row_cost, row_step)
        player = FedPositions(alpha, K, fill, flags, price, draw=script.draw)
        try:
            cost = float(player.generation_costs(1, n)[0])
        except _More as more:
            p = more.args[0]
            stack += [(*script.outcomes, v) for v, q in ((True, p), (False, 1 - p)) if q > 0]
            continue
        total += script.weight * cost
    return total


@pytest.mark.parametrize("alpha", [0.0, 0.4, 0.9, 1.0])
def test_sd_closed_form(alpha: float) -> None:
    """SD k = 1 with catch-up: E[C(2)] = (2 − α)·A and E[C(3)] = A + α·B + (1 − α)·A +
    (1 − α)²·A, with A = c₀(2) + c₁(1) (a step after a rejection or the prompt) and
    B = c₀(2) + c₁(2) (a step after an accepted draft: the drafter feeds 2 positions)."""
    c = Cascade([[0, alpha], [0, 0]], None, [[1]], cost_curve=SD_CURVES, catch_up=[False, True])
    A, B = 1.2 + 0.2, 1.2 + 0.35
    assert c.generation_cost(1) == pytest.approx(A, rel=1e-14)
    assert c.generation_cost(2) == pytest.approx((2 - alpha) * A, rel=1e-14)
    three = A + alpha * B + (1 - alpha) * A + (1 - alpha) ** 2 * A
    assert c.generation_cost(3) == pytest.approx(three, rel=1e-14)
    assert c.ewif(3) == pytest.approx(3 / three, rel=1e-14)
    assert c.ewif(1) == pytest.approx(1 / A, rel=1e-14)


def test_a_short_generation_can_beat_the_endless_ewif() -> None:
    """Not a bound: at α = 1 a generation of 2 tokens overshoots nothing and its one step
    starts from the prefilled prompt, where the catch-up drafter feeds 1 position, not 2:
    EWIF_2 = 2 / (c₀(2) + c₁(1)) > 2 / (c₀(2) + c₁(2)), the endless value."""
    c = Cascade([[0, 1.0], [0, 0]], None, [[1]], cost_curve=SD_CURVES, catch_up=[False, True])
    assert c.ewif(2) == pytest.approx(2 / (1.2 + 0.2), rel=1e-14)
    assert c.ewif() == pytest.approx(2 / (1.2 + 0.35), rel=1e-12)
    assert c.ewif(2) > c.ewif()


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("n", [1, 5, 12])
def test_edges(k: int, n: int) -> None:
    """α = 0: one token per step, so every length gives the endless EWIF; α = 1 without
    catch-up: ⌈n/(k + 1)⌉ steps of k + 1 tokens, each of cost c₀(k + 1) + k·c₁(1)."""
    zero = Cascade([[0, 0.0], [0, 0]], None, [[k]], cost_curve=SD_CURVES, catch_up=[False, True])
    assert zero.ewif(n) == pytest.approx(zero.ewif(), rel=1e-13)
    one = Cascade([[0, 1.0], [0, 0]], None, [[k]], cost_curve=SD_CURVES)
    step = np.interp(k + 1, range(1, 8), SD_CURVES[0]) + k * 0.2
    assert one.ewif(n) == pytest.approx(n / (math.ceil(n / (k + 1)) * step), rel=1e-13)


#: A reviewer whose first pass follows another model's block (it does not lead).
TRAILING = (
    [[0, 0.7, 0.5, 0.4], [0, 0, 0.6, 0.5], [0, 0, 0, 0.8], [0, 0, 0, 0]],
    [[1, 1, 1], [0, 0, 0], [0, 0, 2]],
    "tokens",
)


@pytest.mark.parametrize("alpha,K,fill", [*BRUTE, TRAILING])
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("h,s", [(0.0, 0.0), (0.01, 0.0), (0.01, 0.015), (0.0, 0.015)])
def test_matches_brute_force_enumeration(alpha, K, fill, n: int, h: float, s: float) -> None:
    """E[C(n)] with catch-up equals the exact enumeration of the player to 1e-12, logit
    rows free (h = 0) or priced (the player pays ``c(m) − h·(m − rows)``), with or without
    a row step ``s`` (``s`` less for a one-row pass over ``m >= 2``; Theorem CU, row step)."""
    m = len(K)
    flags = [False] + [True] * m
    curves = CURVES3[: m + 1] if m < 3 else [*CURVES3, [0.02, 0.03]]
    rows, steps = [0.0] + [h] * m, [0.0] + [s] * m
    c = Cascade(
        alpha, None, K, cost_curve=curves, fill=fill, catch_up=flags, row_cost=rows, row_step=steps
    )
    brute = _brute_force_cost(alpha, K, fill, flags, curves, n, rows, steps)
    assert c.generation_cost(n) == pytest.approx(brute, rel=1e-12)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(cascades(max_budget=2), st.integers(1, 12), st.sampled_from([0.0, 0.04]))
def test_matches_monte_carlo_witness(config, n: int, h: float) -> None:
    """Depth 1–3, any catch-up flags, rows free or at ``h``: E[C(n)] lies in the witness's
    99.9 % interval (1500 seeded generations; normal interval on their mean cost)."""
    alpha, K, flags, fill = config
    curves = _curves(K.shape[0])
    rows = [0.0] + [h] * K.shape[0]
    c = Cascade(alpha, None, K, cost_curve=curves, fill=fill, catch_up=flags, row_cost=rows)
    player = FedPositions(alpha, K, fill, flags, _price(curves, rows), seed=n)
    costs = player.generation_costs(1500, n)
    half = 3.2905 * costs.std(ddof=1) / math.sqrt(costs.size)
    assert abs(c.generation_cost(n) - costs.mean()) <= half + 1e-12


def test_witness_fails_without_the_surplus() -> None:
    """The endless EWIF, which ignores the last step's dropped tokens, is outside the
    witness's interval at n = 8 (so the test above can fail)."""
    alpha, K = [[0, 0.8, 0.5], [0, 0, 0.6], [0, 0, 0]], [[2, 1], [0, 2]]
    flags = [False, True, False]
    c = Cascade(alpha, None, K, cost_curve=CURVES3, catch_up=flags)
    costs = FedPositions(alpha, K, "tokens", flags, _price(CURVES3), seed=1).generation_costs(
        3000, 8
    )
    half = 3.2905 * costs.std(ddof=1) / math.sqrt(costs.size)
    endless = 8 * c.expected_cost() / c.expected_tokens()
    assert abs(endless - costs.mean()) > half
    assert abs(c.generation_cost(8) - costs.mean()) <= half


@pytest.mark.parametrize("flags", [[False, True, False], [False, True, True]])
@pytest.mark.parametrize("s", [0.0, 0.02])
def test_long_generations_tend_to_the_endless_ewif(flags, s: float) -> None:
    """Renewal theorem: E[C(n)] − n·E[C]/μ stays bounded, so EWIF_n → EWIF as 1/n — with a
    row step too (Theorem FL's entry costs agree with Theorem CU, row step)."""
    c = Cascade(
        [[0, 0.8, 0.5], [0, 0, 0.6], [0, 0, 0]],
        None,
        [[2, 1], [0, 2]],
        cost_curve=CURVES3,
        catch_up=flags,
        row_cost=[0.0, 0.01, 0.01],
        row_step=[0.0, s, s],
    )
    rate = c.expected_cost() / c.expected_tokens()
    gaps = [c.generation_cost(n) - n * rate for n in (200, 400, 800)]
    assert max(gaps) - min(gaps) < 1e-6
    assert c.ewif(4000) == pytest.approx(c.ewif(), rel=2e-3)
    assert c.ewif(32) < c.ewif()


def test_first_pass_leads() -> None:
    """Drafter 2 leads in [[0, 1], [0, 1]]-like nests, not after drafter 1's own block."""
    assert first_pass_leads([[2, 0], [0, 2]], 1) and first_pass_leads([[2, 0], [0, 2]], 2)
    assert not first_pass_leads([[1, 2], [0, 0]], 2)
    assert not first_pass_leads(TRAILING[1], 2) and first_pass_leads(TRAILING[1], 1)


def test_renewal_mass() -> None:
    """U(n) by hand for steps of 1 or 2 tokens (p, 1 − p): U = 1, p, p² + (1 − p)."""
    p = 0.3
    np.testing.assert_allclose(renewal_mass(np.array([0, p, 1 - p]), 3), [1, p, p * p + 1 - p])
    assert expected_steps(np.array([0.0, 1.0]), 7) == 7.0


def test_workload() -> None:
    """A workload of lengths is Σ n / Σ E[C(n)], whatever the order."""
    c = Cascade([[0, 0.7], [0, 0]], None, [[3]], cost_curve=SD_CURVES, catch_up=[False, True])
    lengths = [5, 32, 5, 17]
    want = sum(lengths) / sum(c.generation_cost(n) for n in lengths)
    assert c.ewif(lengths) == pytest.approx(want, rel=1e-14)
    assert c.ewif(np.array(lengths[::-1])) == pytest.approx(want, rel=1e-14)


@pytest.mark.parametrize(
    "bad,error,match",
    [
        (0, ValueError, "max_new_tokens"),
        (-3, ValueError, "max_new_tokens"),
        (2.5, TypeError, "max_new_tokens"),
        (True, TypeError, "max_new_tokens"),
        ("32", TypeError, "max_new_tokens"),
        ([], ValueError, "at least one"),
        ([4, 0], ValueError, r"max_new_tokens\[1\]"),
        (100_001, ValueError, "at most 100,000 tokens"),
    ],
)
def test_bad_lengths(bad, error, match) -> None:
    c = Cascade([[0, 0.7], [0, 0]], None, [[3]], cost_curve=SD_CURVES)
    with pytest.raises(error, match=match):
        c.ewif(bad)
