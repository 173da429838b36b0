"""Theorem 4.1 (φ), the operator T_α and its distribution, Corollary 4.2 and best_k."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ewif import Pgf, T, best_k, horizontal_ewif, phi, review, sd_ewif

unit = st.floats(0.0, 1.0)
interior = st.floats(0.01, 0.99)
small_k = st.integers(0, 30)


@st.composite
def pgfs(draw: st.DrawFn, max_len: int = 8) -> Pgf:
    weights = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=max_len))
    weights[-1] += 0.5  # non-zero total
    p = np.array(weights) / sum(weights)
    return Pgf(p)


def geometric(a: Fraction, m: int) -> Fraction:
    return sum((a**i for i in range(m + 1)), Fraction(0))


# ---- Theorem 4.1 -------------------------------------------------------------------------


@given(unit, small_k)
def test_phi_coefficients_are_a_distribution_given_by_the_theorem(alpha: float, k: int) -> None:
    p = phi(alpha, k).coefficients
    assert (p >= 0).all()
    assert math.isclose(p.sum(), 1.0, rel_tol=1e-12)
    full = np.zeros(k + 2)
    full[: p.size] = p
    expected = [0.0] + [alpha ** (i - 1) - alpha**i for i in range(1, k + 1)] + [alpha**k]
    np.testing.assert_allclose(full, expected, rtol=1e-12, atol=1e-15)


@given(unit, small_k, st.floats(-1.0, 1.0))
def test_phi_closed_form_equals_coefficient_polynomial(alpha: float, k: int, x: float) -> None:
    """``1 + (x−1)(1−(αx)^(k+1))/(1−αx)`` (away from the removable point αx = 1)."""
    if abs(1 - alpha * x) < 0.05:
        return
    closed = 1 + (x - 1) * (1 - (alpha * x) ** (k + 1)) / (1 - alpha * x)
    assert math.isclose(phi(alpha, k)(x), closed, rel_tol=1e-9, abs_tol=1e-12)


@given(unit, small_k)
def test_phi_mean_is_geometric_sum(alpha: float, k: int) -> None:
    """``φ'(1) = (1 − α^(k+1))/(1 − α)``, compared with exact rationals."""
    exact = geometric(Fraction(alpha), k)
    assert math.isclose(phi(alpha, k).mean(), float(exact), rel_tol=1e-12)


@pytest.mark.parametrize("k", [0, 1, 5])
def test_phi_edges_are_exact(k: int) -> None:
    assert phi(0.0, k) == Pgf.point(1)
    assert phi(1.0, k) == Pgf.point(k + 1)
    assert phi(0.37, 0) == Pgf.point(1)


@given(unit, small_k)
def test_phi_is_review_of_a_fixed_length_draft(alpha: float, k: int) -> None:
    assert phi(alpha, k).isclose(review(alpha, Pgf.point(k)), atol=1e-15)


# ---- T_α and review ----------------------------------------------------------------------


@given(unit, st.integers(0, 60))
def test_T_of_monomial(alpha: float, j: int) -> None:
    """``T_α(x^j) = (1 − α^(j+1))/(1 − α)`` against exact rationals (α = 1: j + 1)."""
    exact = geometric(Fraction(alpha), j)
    assert math.isclose(T(alpha, Pgf.point(j)), float(exact), rel_tol=1e-12)


@given(unit, pgfs(), pgfs(), st.floats(0.0, 1.0))
def test_T_is_linear(alpha: float, g: Pgf, h: Pgf, w: float) -> None:
    n = max(g.max_value, h.max_value) + 1
    mix = Pgf(
        w * np.pad(g.coefficients, (0, n - g.coefficients.size))
        + (1 - w) * np.pad(h.coefficients, (0, n - h.coefficients.size))
    )
    expected = w * T(alpha, g) + (1 - w) * T(alpha, h)
    assert math.isclose(T(alpha, mix), expected, rel_tol=1e-12)


@given(st.floats(0.0, 0.9), pgfs())
def test_T_equals_its_closed_form(alpha: float, g: Pgf) -> None:
    """``T_α(g) = (1 − α g(α))/(1 − α)`` (closed form evaluated where it is well conditioned)."""
    assert math.isclose(T(alpha, g), (1 - alpha * g(alpha)) / (1 - alpha), rel_tol=1e-12)


@given(pgfs())
def test_T_edges(g: Pgf) -> None:
    assert T(0.0, g) == 1.0
    assert math.isclose(T(1.0, g), 1 + g.mean(), rel_tol=1e-15)


@given(st.fractions(0, 1, max_denominator=50), st.lists(st.integers(1, 9), min_size=1, max_size=5))
def test_review_matches_enumeration_of_bernoulli_reviews(alpha: Fraction, weights: list) -> None:
    """Enumerate every accept/reject sequence of a reviewer over every draft length."""
    total = sum(weights)
    p_len = [Fraction(w, total) for w in weights]
    exact: dict[int, Fraction] = {}
    for length, p_l in enumerate(p_len):
        for bits in itertools.product([True, False], repeat=length):
            prob = p_l
            for accepted in bits:
                prob *= alpha if accepted else 1 - alpha
            leading = next((i for i, b in enumerate(bits) if not b), length)
            exact[leading + 1] = exact.get(leading + 1, Fraction(0)) + prob
    got = review(float(alpha), Pgf([float(p) for p in p_len]))
    for i in range(got.max_value + 2):
        assert math.isclose(got.pmf(i), float(exact.get(i, 0)), rel_tol=1e-12, abs_tol=1e-15)


@given(unit, pgfs())
def test_review_mean_is_T(alpha: float, g: Pgf) -> None:
    assert math.isclose(review(alpha, g).mean(), T(alpha, g), rel_tol=1e-12)


# ---- Corollary 4.2 -----------------------------------------------------------------------


@given(unit, small_k, st.floats(0.0, 5.0))
def test_sd_ewif_is_a_special_case_of_the_general_functions(alpha: float, k: int, c: float) -> None:
    value = sd_ewif(alpha, k, c)
    assert isinstance(value, float)
    assert math.isclose(value, T(alpha, Pgf.point(k)) / (1 + k * c), rel_tol=1e-12)
    assert math.isclose(value, horizontal_ewif([alpha] * k, [c] * k), rel_tol=1e-12)


@given(small_k, st.floats(0.0, 5.0))
def test_sd_ewif_edges_are_exact(k: int, c: float) -> None:
    assert sd_ewif(0.3, 0, c) == 1.0
    assert sd_ewif(0.0, k, c) == 1.0 / (1.0 + k * c)
    assert sd_ewif(1.0, k, c) == (k + 1) / (1.0 + k * c)


def test_sd_ewif_broadcasts() -> None:
    alpha = np.linspace(0, 1, 5)
    k = np.arange(4)[:, None]
    out = sd_ewif(alpha, k, 0.1)
    assert out.shape == (4, 5)
    for i, j in np.ndindex(out.shape):
        assert out[i, j] == sd_ewif(float(alpha[j]), int(k[i, 0]), 0.1)


# ---- best_k ------------------------------------------------------------------------------


@given(st.floats(0.05, 0.9), st.floats(0.02, 1.0))
def test_best_k_is_the_smallest_maximiser(alpha: float, c: float) -> None:
    """Brute force over every k allowed by the bound ``E(k) ≤ 1/((1−α)(1+kc))``."""
    k_star, ewif = best_k(alpha, c)
    limit = int(alpha / ((1 - alpha) * c)) + 2
    ks = np.arange(limit + 1)
    values = sd_ewif(alpha, ks, c)
    assert ewif == values[k_star]
    assert ewif >= values.max() * (1 - 1e-14)
    runner_up = np.delete(values, np.argmax(values)).max()
    if values.max() - runner_up > 1e-12 * values.max():  # not a numerical tie
        assert k_star == int(np.argmax(values))
    bound = 1 / ((1 - alpha) * (1 + ks * c))
    assert (values <= bound * (1 + 1e-12)).all()


@given(interior, st.floats(0.001, 1.0))
def test_drafting_helps_iff_c_below_alpha(alpha: float, c: float) -> None:
    """``h(0) = α − c``: the optimum is k = 0 exactly when c ≥ α."""
    k_star, _ = best_k(alpha, c)
    assert (k_star == 0) == (c >= alpha)


def test_best_k_near_one_uses_logarithmic_search() -> None:
    k_star, ewif = best_k(1 - 1e-9, 1e-3)
    values = sd_ewif(1 - 1e-9, np.array([k_star - 1, k_star, k_star + 1]), 1e-3)
    assert values[1] > values[0] and values[1] >= values[2]
    assert ewif == values[1]


def test_best_k_edges() -> None:
    assert best_k(0.0, 0.0) == (0, 1.0)
    assert best_k(0.0, 0.5) == (0, 1.0)
    assert best_k(1.0, 1.0) == (0, 1.0)
    assert best_k(1.0, 2.0) == (0, 1.0)
    with pytest.raises(ValueError, match="no finite optimal k"):
        best_k(0.5, 0.0)
    with pytest.raises(ValueError, match="no finite optimal k"):
        best_k(1.0, 0.5)
    with pytest.raises(ValueError, match="exceeds 2\\*\\*53"):
        best_k(1 - 2**-53, 5e-324)


def _h(alpha: float, c: float, k: int):
    """``h(k) = α^(k+1)(1 + kc) − c G(α, k)`` in 80-digit arithmetic: ``k*`` is the first
    ``k`` with ``h(k) ≤ 0``."""
    import mpmath

    with mpmath.workdps(80):
        a, cc = mpmath.mpf(alpha), mpmath.mpf(c)
        return a ** (k + 1) * (1 + k * cc) - cc * (1 - a ** (k + 1)) / (1 - a)


def test_best_k_answers_beyond_the_old_search_bound() -> None:
    """The bound α/((1−α)c) is 1e18 here, yet k* = 1 146 193 238 (80-digit bisection)."""
    k_star, ewif = best_k(1 - 1e-9, 1e-9)
    assert k_star == 1_146_193_238
    assert ewif == pytest.approx(3.178444373208e8, rel=1e-12)
    assert _h(1 - 1e-9, 1e-9, k_star - 1) > 0 >= _h(1 - 1e-9, 1e-9, k_star)


@given(st.floats(1.0, 15.95), st.floats(0.5, 323.0))
def test_best_k_near_one_matches_a_high_precision_reference(gap_digits, c_digits) -> None:
    """α = 1 − 10^-u, c = 10^-v: k* is the first k with h(k) ≤ 0 (checked at 80 digits),
    or refused exactly when h(2**53) > 0."""
    alpha, c = 1.0 - 10.0**-gap_digits, 10.0**-c_digits
    if alpha == 1.0 or c == 0.0:
        return
    try:
        k_star, ewif = best_k(alpha, c)
    except ValueError as err:
        assert "exceeds 2**53" in str(err)
        assert _h(alpha, c, 2**53) > 0
        return
    assert k_star == 0 or _h(alpha, c, k_star - 1) > 0
    assert _h(alpha, c, k_star) <= 0
    import mpmath

    with mpmath.workdps(40):
        a = mpmath.mpf(alpha)
        exact = (1 - a ** (k_star + 1)) / (1 - a) / (1 + k_star * mpmath.mpf(c))
    assert ewif == pytest.approx(float(exact), rel=1e-12)
