"""Theorem 4.3 (power, not composition) and Corollary 4.4 with its exact c2 threshold."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif import T, phi, sd_ewif, vertical_c2_threshold, vertical_ewif

rationals = st.fractions(0, 1, max_denominator=64)
# 0 or far enough from 0 that α^n (α α2)^k does not underflow
acceptance = st.one_of(st.just(0.0), st.floats(1e-6, 1.0))


def geometric(a: Fraction, m: int) -> Fraction:
    return sum((a**i for i in range(m + 1)), Fraction(0))


def enumerated_tokens(alpha: Fraction, alpha2: Fraction, k: int, n: int) -> Fraction:
    """Expected target-step tokens by enumerating every accept/reject bit of d1's n reviews.

    Round r: d2 drafts k tokens, d1 accepts them one by one (prob. α2); the round yields
    its accepted prefix plus d1's own token. The target then reviews the L tokens of all
    rounds and yields ``G(α, L) = Σ_{i≤L} α^i`` expected tokens.
    """
    total = Fraction(0)
    for bits in itertools.product([True, False], repeat=k * n):
        prob, length = Fraction(1), 0
        for r in range(n):
            round_bits = bits[r * k : (r + 1) * k]
            for accepted in round_bits:
                prob *= alpha2 if accepted else 1 - alpha2
            length += next((i for i, b in enumerate(round_bits) if not b), k) + 1
        total += prob * geometric(alpha, length)
    return total


def composition_tokens(alpha: float, alpha2: float, k: int, n: int) -> float:
    """The composition reading: ``(1 − α φ(φ(…φ(α))))/(1 − α)`` with n-fold composition."""
    f, y = phi(alpha2, k), alpha
    for _ in range(n):
        y = f(y)
    return (1 - alpha * y) / (1 - alpha)


@settings(max_examples=40)
@given(rationals, rationals, st.integers(0, 3), st.integers(0, 3))
def test_vertical_ewif_equals_exact_enumeration_of_n_rounds(
    alpha: Fraction, alpha2: Fraction, k: int, n: int
) -> None:
    c1, c2 = 0.125, 0.03125
    exact = enumerated_tokens(alpha, alpha2, k, n) / (1 + n * Fraction(c1) + n * k * Fraction(c2))
    got = vertical_ewif(float(alpha), float(alpha2), k, n, c1, c2)
    assert math.isclose(got, float(exact), rel_tol=1e-12)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 6), st.integers(0, 5))
def test_vertical_tokens_are_T_of_the_nth_power(
    alpha: float, alpha2: float, k: int, n: int
) -> None:
    tokens = vertical_ewif(alpha, alpha2, k, n, 0.0, 0.0)
    assert math.isclose(tokens, T(alpha, phi(alpha2, k) ** n), rel_tol=1e-12)


def test_composition_reading_disagrees_with_enumeration() -> None:
    """n = 2, k = 1, α = α2 = 1/2: the power gives 1.859375, the composition 1.7421875."""
    exact = float(enumerated_tokens(Fraction(1, 2), Fraction(1, 2), 1, 2))
    assert exact == 1.859375
    assert vertical_ewif(0.5, 0.5, 1, 2, 0.0, 0.0) == pytest.approx(exact, rel=1e-15)
    assert composition_tokens(0.5, 0.5, 1, 2) == pytest.approx(1.7421875, rel=1e-15)


@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 6))
def test_composition_agrees_for_one_round(alpha: float, alpha2: float, k: int) -> None:
    if alpha == 1.0:
        return  # the composition reading's closed form is 0/0 there
    power = vertical_ewif(alpha, alpha2, k, 1, 0.0, 0.0)
    assert math.isclose(power, composition_tokens(alpha, alpha2, k, 1), rel_tol=1e-9)


def test_composition_errs_in_both_directions() -> None:
    over = composition_tokens(0.9, 0.99, 2, 3) - vertical_ewif(0.9, 0.99, 2, 3, 0.0, 0.0)
    under = composition_tokens(0.9, 0.2, 3, 3) - vertical_ewif(0.9, 0.2, 3, 3, 0.0, 0.0)
    assert over > 2.9 and under < -1.3


# ---- Corollary 4.4 -----------------------------------------------------------------------


def phi_at(alpha2: Fraction, k: int, x: Fraction) -> Fraction:
    coefficients = [alpha2 ** (i - 1) * (1 - alpha2) for i in range(1, k + 1)] + [alpha2**k]
    return sum((p * x ** (i + 1) for i, p in enumerate(coefficients)), Fraction(0))


@given(rationals, rationals, st.integers(0, 8))
def test_phi_gap_identity_and_exact_strictness(alpha: Fraction, alpha2: Fraction, k: int) -> None:
    """``α − φ_{α2,k}(α) = (1−α) Σ_{i=1}^{k} (α α2)^i``; strict ``<`` iff α < 1, αα2 > 0, k ≥ 1."""
    gap = alpha - phi_at(alpha2, k, alpha)
    assert gap == (1 - alpha) * sum(((alpha * alpha2) ** i for i in range(1, k + 1)), Fraction(0))
    assert (gap > 0) == (alpha < 1 and alpha * alpha2 > 0 and k >= 1)
    assert gap >= 0


@given(acceptance, acceptance, st.integers(1, 8), st.integers(1, 6), st.floats(0.0, 2.0))
def test_free_bottom_model_never_loses(
    alpha: float, alpha2: float, k: int, n: int, c1: float
) -> None:
    """c2 = 0: VC ≥ SD(d1, k=n), strictly iff c2* > 0 iff α > 0 and α2 > 0."""
    vc, sd = vertical_ewif(alpha, alpha2, k, n, c1, 0.0), sd_ewif(alpha, n, c1)
    threshold = vertical_c2_threshold(alpha, alpha2, k, n, c1)
    assert vc >= sd * (1 - 1e-14)
    assert (threshold > 0) == (alpha > 0 and alpha2 > 0)
    if threshold == 0:
        assert math.isclose(vc, sd, rel_tol=1e-14)


def exact_threshold(alpha: Fraction, alpha2: Fraction, k: int, n: int, c1: Fraction) -> Fraction:
    """``(1 + n c1)(α^(n+1) − α φ(α)^n)/(n k (1 − α^(n+1)))`` for α < 1."""
    phi_a = phi_at(alpha2, k, alpha)
    return (1 + n * c1) * (alpha ** (n + 1) - alpha * phi_a**n) / (n * k * (1 - alpha ** (n + 1)))


@given(
    st.fractions(0, Fraction(63, 64), max_denominator=64),
    rationals,
    st.integers(1, 5),
    st.integers(1, 4),
    st.fractions(0, 2, max_denominator=16),
    st.fractions(0, 1, max_denominator=1000),
)
def test_c2_threshold_is_exact_break_even(
    alpha: Fraction, alpha2: Fraction, k: int, n: int, c1: Fraction, c2: Fraction
) -> None:
    """Exact rationals: VC − SD has the sign of c2* − c2, and the float c2* is accurate."""
    star = exact_threshold(alpha, alpha2, k, n, c1)
    tokens_vc = (1 - alpha * phi_at(alpha2, k, alpha) ** n) / (1 - alpha)
    sd = (1 - alpha ** (n + 1)) / ((1 - alpha) * (1 + n * c1))
    for cost in (c2, star, star + c2 + Fraction(1, 10**6)):
        vc = tokens_vc / (1 + n * c1 + n * k * cost)
        assert (vc > sd) == (cost < star) and (vc == sd) == (cost == star)
    got = vertical_c2_threshold(float(alpha), float(alpha2), k, n, float(c1))
    assert math.isclose(got, float(star), rel_tol=1e-12, abs_tol=0.0)


@given(
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.integers(1, 8),
    st.integers(1, 6),
    st.floats(0.0, 2.0),
)
def test_vertical_ewif_ties_with_sd_at_the_threshold(alpha, alpha2, k, n, c1) -> None:
    star = vertical_c2_threshold(alpha, alpha2, k, n, c1)
    assert math.isclose(
        vertical_ewif(alpha, alpha2, k, n, c1, star), sd_ewif(alpha, n, c1), rel_tol=1e-12
    )


def test_counterexample_to_almost_always_improves() -> None:
    """A weak bottom model (α2 = 0.1) with cost c2 = 0.01 ≪ 1 makes the cascade LOSE:
    exactly, c2* = 314970182532/46539306640625 ≈ 0.00677 and VC ≈ 1.99226 < SD = 61/30."""
    alpha, alpha2, k, n, c1, c2 = Fraction(4, 5), Fraction(1, 10), 4, 2, Fraction(1, 10), 0.01
    star = exact_threshold(alpha, alpha2, k, n, c1)
    assert star == Fraction(314970182532, 46539306640625)
    got = vertical_c2_threshold(float(alpha), float(alpha2), k, n, float(c1))
    assert got == pytest.approx(float(star), rel=1e-14)
    vc = vertical_ewif(float(alpha), float(alpha2), k, n, float(c1), c2)
    sd = sd_ewif(float(alpha), n, float(c1))
    assert sd == pytest.approx(61 / 30, rel=1e-15)
    assert vc == pytest.approx(9727821571501 / 4882812500000, rel=1e-14)
    assert vc < sd


def test_threshold_at_alpha_one_is_the_limit() -> None:
    """α = 1: c2* = (1 + n c1) Σ_{i=1}^{k} α2^i / (k (n + 1)) (limit of the 0/0 form)."""
    got = vertical_c2_threshold(1.0, 0.5, 3, 2, 0.1)
    assert got == pytest.approx(1.2 * (0.5 + 0.25 + 0.125) / (3 * 3), rel=1e-14)
    near = vertical_c2_threshold(1 - 1e-12, 0.5, 3, 2, 0.1)
    assert near == pytest.approx(got, rel=1e-10)


def test_vertical_edges_are_exact() -> None:
    assert vertical_ewif(0.0, 0.7, 3, 2, 0.1, 0.01) == 1 / (1 + 0.2 + 0.06)
    assert vertical_ewif(0.6, 0.7, 3, 0, 0.1, 0.01) == 1.0
    assert vertical_ewif(0.6, 0.7, 0, 3, 0.1, 0.01) == sd_ewif(0.6, 3, 0.1)
    assert vertical_ewif(1.0, 0.5, 2, 3, 0.0, 0.0) == 1 + 3 * 1.75


def test_vertical_broadcasts() -> None:
    alpha = np.array([0.2, 0.5, 0.9])
    n = np.array([[1], [2]])
    out = vertical_ewif(alpha, 0.6, 3, n, 0.1, 0.01)
    assert out.shape == (2, 3)
    for i, j in np.ndindex(out.shape):
        assert out[i, j] == pytest.approx(
            vertical_ewif(float(alpha[j]), 0.6, 3, int(n[i, 0]), 0.1, 0.01), rel=1e-15
        )
    assert vertical_c2_threshold(alpha, 0.6, 3, n, 0.1).shape == (2, 3)
