"""The paper's special cases, sampled token by token, against ewif's closed forms.

Levels: 99.9 % intervals (z = 3.29), χ² rejects at p < 0.001; fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from ewif.theory.horizontal import horizontal_ewif
from ewif.theory.pgf import Pgf
from ewif.theory.theorems import phi, review, sd_ewif, vertical_ewif
from simulate.bernoulli import simulate
from simulate.special import simulate_horizontal, simulate_sd, simulate_vertical
from simulate.stats import chi_square_gof

LEVEL = 0.999
alphas = st.floats(0.05, 0.95)
costs = st.floats(0.0, 0.3)


@settings(max_examples=15)
@given(alphas, st.integers(0, 8), costs, st.integers(0, 2**32 - 1))
def test_sd_matches_corollary_4_2(alpha: float, k: int, c: float, seed: int) -> None:
    r = simulate_sd(alpha, k, c, trials=20_000, seed=seed)
    assert r.ewif(LEVEL).contains(sd_ewif(alpha, k, c))
    assert not chi_square_gof(r.token_counts(), phi(alpha, k).coefficients).rejects(LEVEL)


@settings(max_examples=15)
@given(alphas, alphas, st.integers(1, 5), st.integers(1, 4), costs, costs, st.integers(0, 2**32))
def test_vertical_matches_theorem_4_3_power(a, a2, k, n, c1, c2, seed) -> None:
    r = simulate_vertical(a, a2, k, n, c1, c2, trials=20_000, seed=seed)
    assert r.ewif(LEVEL).contains(vertical_ewif(a, a2, k, n, c1, c2))
    exact = review(a, phi(a2, k) ** n)
    assert not chi_square_gof(r.token_counts(), exact.coefficients).rejects(LEVEL)


@settings(max_examples=15)
@given(st.lists(st.tuples(alphas, costs), min_size=1, max_size=6), st.integers(0, 2**32 - 1))
def test_horizontal_matches_theorem_4_5(positions, seed) -> None:
    a = np.array([p[0] for p in positions])
    c = np.array([p[1] for p in positions])
    r = simulate_horizontal(a, c, trials=20_000, seed=seed)
    assert r.ewif(LEVEL).contains(horizontal_ewif(a, c))
    exact = r.acceptance_by_position(a.size)
    assert np.all((exact.low <= np.cumprod(a)) & (np.cumprod(a) <= exact.high))


def test_engine_and_token_sampler_agree_on_the_same_configuration() -> None:
    """Theorem 4.3 as a cascade (fill="rounds") through the general engine and directly."""
    a, a2, k, n, c1, c2 = 0.75, 0.8, 4, 3, 0.1, 0.01
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[1, 2] = a, a2
    cascade = Cascade(alpha, [1.0, c1, c2], [[n, 0], [0, k]], fill="rounds")
    engine = simulate(cascade, 60_000, seed=1)
    direct = simulate_vertical(a, a2, k, n, c1, c2, trials=60_000, seed=2)
    exact = vertical_ewif(a, a2, k, n, c1, c2)
    for r in (engine, direct):
        assert r.ewif(LEVEL).contains(exact)
        assert [e.value for e in r.passes_per_step()] == pytest.approx([1, n, n * k])
    # Two-sample check of the tokens histograms (difference of means, 99.9 %).
    d = engine.expected_tokens().value - direct.expected_tokens().value
    se = np.hypot(engine.expected_tokens().se, direct.expected_tokens().se)
    assert abs(d) < 3.29 * se


def test_edges() -> None:
    assert simulate_sd(0.0, 5, 0.1, trials=100).token_counts().tolist() == [0, 100]
    assert simulate_sd(1.0, 5, 0.0, trials=100).ewif().value == 6.0
    r = simulate_sd(0.5, 0, 0.3, trials=100)
    assert r.ewif().value == 1.0 and r.ewif().se == 0.0
    assert simulate_vertical(1.0, 1.0, 2, 2, 0.0, 0.0, trials=50).token_counts()[-1] == 50
    assert Pgf(simulate_horizontal([1.0, 0.0], [0.0, 0.0], trials=10).tokens_distribution()) == (
        Pgf.point(2)
    )


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="alpha"):
        simulate_sd(1.5, 2, 0.1)
    with pytest.raises(ValueError, match="k"):
        simulate_sd(0.5, -1, 0.1)
    with pytest.raises(ValueError, match="same length"):
        simulate_horizontal([0.5, 0.5], [0.1])
    with pytest.raises(ValueError, match="c2"):
        simulate_vertical(0.5, 0.5, 2, 2, 0.1, -1.0)
