"""Theorem 4.5 (horizontal EWIF) and Corollary 4.6 (its gradient)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ewif import HorizontalGradient, horizontal_ewif, horizontal_gradient, sd_ewif


@st.composite
def cascades(draw: st.DrawFn, lo: float = 0.0, hi: float = 1.0, min_k: int = 1):
    k = draw(st.integers(min_k, 10))
    alphas = draw(st.lists(st.floats(lo, hi), min_size=k, max_size=k))
    costs = draw(st.lists(st.floats(0.0, 2.0), min_size=k, max_size=k))
    return np.array(alphas), np.array(costs)


@given(st.floats(0.0, 1.0), st.integers(0, 20), st.floats(0.0, 3.0))
def test_reduces_to_corollary_4_2(alpha: float, k: int, c: float) -> None:
    assert math.isclose(horizontal_ewif([alpha] * k, [c] * k), sd_ewif(alpha, k, c), rel_tol=1e-13)


def test_known_values_and_empty_cascade() -> None:
    assert horizontal_ewif([], []) == 1.0
    assert horizontal_ewif([0.5, 0.5], [0.25, 0.25]) == (1 + 0.5 + 0.25) / 1.5
    grad = horizontal_gradient([], [])
    assert grad.alpha.shape == (0,) and grad.cost.shape == (0,)


@given(cascades(lo=0.01, hi=0.99))
def test_gradient_matches_central_differences(cascade) -> None:
    alphas, costs = cascade
    grad = horizontal_gradient(alphas, costs)
    h = 1e-6
    for pos in range(alphas.size):
        up, down = alphas.copy(), alphas.copy()
        up[pos] += h
        down[pos] -= h
        numeric = (horizontal_ewif(up, costs) - horizontal_ewif(down, costs)) / (2 * h)
        assert grad.alpha[pos] == pytest.approx(numeric, rel=1e-6, abs=1e-8)
        c_up, c_down = costs.copy(), costs.copy()
        c_up[pos] += h
        c_down[pos] = max(0.0, c_down[pos] - h)
        numeric_c = (horizontal_ewif(alphas, c_up) - horizontal_ewif(alphas, c_down)) / (
            c_up[pos] - c_down[pos]
        )
        assert grad.cost[pos] == pytest.approx(numeric_c, rel=1e-5, abs=1e-8)


@given(cascades())
def test_gradient_is_the_papers_sum_of_products(cascade) -> None:
    """``dT/dα_l = Σ_{i=l}^{k} Π_{j≤i, j≠l} α_j / D`` written out literally."""
    alphas, costs = cascade
    k, d = alphas.size, 1 + costs.sum()
    grad = horizontal_gradient(alphas, costs)
    for ell in range(1, k + 1):  # the paper's index l
        literal = sum(
            math.prod(alphas[j - 1] for j in range(1, i + 1) if j != ell) for i in range(ell, k + 1)
        )
        assert grad.alpha[ell - 1] == pytest.approx(literal / d, rel=1e-12, abs=1e-300)


@given(cascades(min_k=1))
def test_first_position_gradient_dominates_last(cascade) -> None:
    """``dT/dα_1 ≥ dT/dα_k``; equality iff k = 1 or (k = 2, α = (1, 0))."""
    alphas, costs = cascade
    g = horizontal_gradient(alphas, costs).alpha
    d = 1 + costs.sum()
    equality_case = alphas.size == 1 or (alphas.size == 2 and alphas[0] == 1 and alphas[1] == 0)
    if equality_case:
        assert g[0] == g[-1]
    else:
        # margin: R_1 − P_{k−1} ≥ 1 + α_2 − α_1 > 0, and ≥ 1 for k ≥ 3
        margin = 1.0 if alphas.size >= 3 else 1 + alphas[1] - alphas[0]
        assert g[0] - g[-1] >= margin / d * (1 - 1e-12)


def test_equality_case_of_corollary_4_6() -> None:
    g = horizontal_gradient([1.0, 0.0], [0.0, 0.0]).alpha
    assert g[0] == g[1] == 1.0


@given(cascades())
def test_non_increasing_acceptance_orders_every_adjacent_pair(cascade) -> None:
    alphas, costs = cascade
    alphas = np.sort(alphas)[::-1]
    g = horizontal_gradient(alphas, costs).alpha
    assert (g[:-1] >= g[1:] * (1 - 1e-12)).all()


def test_adjacent_positions_need_not_be_ordered() -> None:
    """α = (0.9, 0.1, 0.9): dT/dα_2 = 1.71 > dT/dα_1 = 1.19 (no cost)."""
    g = horizontal_gradient([0.9, 0.1, 0.9], [0.0, 0.0, 0.0]).alpha
    np.testing.assert_allclose(g, [1.19, 1.71, 0.09], rtol=1e-14)


def test_vectorised_over_leading_axes() -> None:
    rng = np.random.default_rng(3)
    alphas = rng.uniform(0, 1, (4, 3, 5))
    costs = rng.uniform(0, 1, (3, 5))  # broadcast over the first axis
    values = horizontal_ewif(alphas, costs)
    grad = horizontal_gradient(alphas, costs)
    assert isinstance(grad, HorizontalGradient)
    assert values.shape == (4, 3) and grad.alpha.shape == grad.cost.shape == (4, 3, 5)
    for i, j in np.ndindex(4, 3):
        assert values[i, j] == pytest.approx(horizontal_ewif(alphas[i, j], costs[j]), rel=1e-15)
        single = horizontal_gradient(alphas[i, j], costs[j])
        np.testing.assert_allclose(grad.alpha[i, j], single.alpha, rtol=1e-15)
        np.testing.assert_allclose(grad.cost[i, j], single.cost, rtol=1e-15)
