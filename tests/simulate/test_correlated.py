"""Non-i.i.d. acceptance: position-dependent curves and bursty (Markov) chains.

Levels: 99.9 % intervals (normal for i.i.d. steps, Student-t batch means over streams
for the Markov model); fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from ewif.theory.horizontal import horizontal_ewif
from simulate.bernoulli import CascadeSpec, simulate
from simulate.correlated import (
    MarkovAcceptance,
    PositionAcceptance,
    correlation_report,
    rho_range,
    simulate_markov,
)

LEVEL = 0.999


def _sd(alpha: float, k: int, c: float) -> Cascade:
    return Cascade([[np.nan, alpha], [np.nan, np.nan]], [1.0, c], [[k]])


def _two_level() -> Cascade:
    a = np.full((3, 3), np.nan)
    a[0, 1], a[0, 2], a[1, 2] = 0.75, 0.45, 0.6
    return Cascade(a, [1.0, 0.08, 0.0], [[3, 4], [0, 5]])


@settings(max_examples=15)
@given(
    st.lists(st.floats(0.05, 0.99), min_size=1, max_size=6),
    st.floats(0, 0.2),
    st.integers(0, 2**32 - 1),
)
def test_position_curve_on_one_drafter_is_theorem_4_5(curve, c, seed) -> None:
    """SD whose α depends on the position is exactly the horizontal cascade (Thm 4.5)."""
    curve = np.array(curve)
    cascade = _sd(0.5, curve.size, c)
    process = PositionAcceptance(cascade.alpha, {(0, 1): curve})
    r = simulate(cascade, 20_000, seed=seed, acceptance=process)
    assert r.ewif(LEVEL).contains(horizontal_ewif(curve, np.full(curve.size, c)))


def test_flat_position_curve_is_the_iid_model() -> None:
    cascade = _two_level()
    flat = {(0, 1): [0.75], (0, 2): [0.45]}
    r = simulate(cascade, 60_000, seed=4, acceptance=PositionAcceptance(cascade.alpha, flat))
    assert r.ewif(LEVEL).contains(cascade.ewif())


@pytest.mark.parametrize("rho", [-0.3, 0.5, 0.9])
def test_markov_chain_has_marginal_alpha_and_lag_one_correlation_rho(rho: float) -> None:
    cascade = _sd(0.7, 1, 0.0)
    rng = np.random.default_rng(7)
    streams, tests = 4_000, 60
    chain = MarkovAcceptance(CascadeSpec.of(cascade), rho, streams, rng)
    ids, zero, one = np.arange(streams), np.zeros(streams, int), np.ones(streams, int)
    x = np.array([chain.block(0, 1, ids, zero, one, rng) for _ in range(tests)], float)
    mean = x.mean()
    lag = np.corrcoef(x[:-1].ravel(), x[1:].ravel())[0, 1]
    n = x.size  # se of the mean inflates by sqrt((1+ρ)/(1−ρ)) under correlation
    se = np.sqrt(0.7 * 0.3 / n * (1 + rho) / (1 - rho))
    assert abs(mean - 0.7) < 3.29 * se
    assert abs(lag - rho) < 0.02


def test_rho_zero_recovers_the_exact_iid_ewif() -> None:
    cascade = _two_level()
    r = simulate_markov(cascade, 0.0, streams=1_000, steps=60, seed=2)
    assert r.ewif(LEVEL).contains(cascade.ewif())
    assert r.expected_tokens(LEVEL).contains(cascade.expected_tokens())
    assert r.trials == 60_000 and r.steps == 60


def test_burstiness_makes_the_iid_prediction_detectably_wrong() -> None:
    """One drafter, α = 0.7, k = 5: i.i.d. EWIF overestimates bursty text (ρ = 0.8)."""
    cascade = _sd(0.7, 5, 0.05)
    rows = correlation_report(cascade, rhos=(0.0, 0.8), streams=1_000, steps=60, seed=9)
    iid, bursty = rows
    assert iid.simulated.contains(iid.ewif_iid)
    assert not bursty.simulated.contains(bursty.ewif_iid)
    assert bursty.relative_error > 0.03


def test_bad_input() -> None:
    cascade = _sd(0.8, 3, 0.1)
    assert rho_range(0.8) == (pytest.approx(-0.25), 1.0)
    with pytest.raises(ValueError, match="rho"):
        simulate_markov(cascade, 1.0, 10, 2)
    with pytest.raises(ValueError, match="rho"):
        simulate_markov(cascade, -0.5, 10, 2)
    with pytest.raises(ValueError, match="streams"):
        simulate_markov(cascade, 0.2, 1, 2)
    with pytest.raises(ValueError, match="curves"):
        PositionAcceptance(cascade.alpha, {(0, 1): [1.2]})
