"""Relative error ≤ 1e-12 against exact rational arithmetic, including α within 1e-9 of 1.

Every float input is converted exactly to a ``Fraction``; the exact result of the formula
for those rationals is the reference.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif import Pgf, T, horizontal_ewif, sd_ewif, vertical_c2_threshold, vertical_ewif
from ewif.base.arithmetic import geometric_sum

RTOL = 1e-12

# α anywhere in [0, 1], or within 1e-9 of 1 (down to one ulp below 1).
alphas = st.one_of(
    st.floats(0.0, 1.0),
    st.floats(1e-16, 1e-9).map(lambda d: 1.0 - d),
)
costs = st.floats(0.0, 10.0)


def rel_err(got: float, exact: Fraction) -> float:
    if exact == 0:
        return abs(got)
    return float(abs(Fraction(got) - exact) / abs(exact))


def geometric(a: Fraction, m: int) -> Fraction:
    return sum((a**i for i in range(m + 1)), Fraction(0))


def phi_at(a2: Fraction, k: int, x: Fraction) -> Fraction:
    coefficients = [a2 ** (i - 1) * (1 - a2) for i in range(1, k + 1)] + [a2**k]
    return sum((p * x ** (i + 1) for i, p in enumerate(coefficients)), Fraction(0))


def vertical_tokens(a: Fraction, a2: Fraction, k: int, n: int) -> Fraction:
    if a == 1:
        return 1 + n * geometric(a2, k)  # 1 + n φ'(1)
    return (1 - a * phi_at(a2, k, a) ** n) / (1 - a)


def test_naive_closed_form_would_fail_the_bound() -> None:
    """The tolerance is meaningful: the textbook form loses ~8 digits at α = 1 − 1e-9."""
    a = 1.0 - 1e-9
    naive = (1 - a**6) / (1 - a)
    assert rel_err(naive, geometric(Fraction(a), 5)) > 1e-9
    assert rel_err(float(geometric_sum(1.0 - a, 5)), geometric(Fraction(a), 5)) < RTOL


@given(alphas, st.integers(0, 100), costs)
def test_sd_ewif(alpha: float, k: int, c: float) -> None:
    exact = geometric(Fraction(alpha), k) / (1 + k * Fraction(c))
    assert rel_err(sd_ewif(alpha, k, c), exact) <= RTOL


@given(alphas, st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40))
def test_T(alpha: float, weights: list[float]) -> None:
    weights[-1] += 0.5
    g = Pgf(np.array(weights) / sum(weights))
    a = Fraction(alpha)
    exact = sum((Fraction(p) * geometric(a, j) for j, p in enumerate(g.coefficients)), Fraction(0))
    assert rel_err(T(alpha, g), exact) <= RTOL


@settings(max_examples=60)
@given(alphas, alphas, st.integers(0, 12), st.integers(0, 8), costs, costs)
def test_vertical_ewif(alpha: float, alpha2: float, k: int, n: int, c1: float, c2: float) -> None:
    a, a2 = Fraction(alpha), Fraction(alpha2)
    exact = vertical_tokens(a, a2, k, n) / (1 + n * Fraction(c1) + n * k * Fraction(c2))
    assert rel_err(vertical_ewif(alpha, alpha2, k, n, c1, c2), exact) <= RTOL


@settings(max_examples=60)
@given(alphas, alphas, st.integers(1, 12), st.integers(1, 8), costs)
def test_vertical_c2_threshold(alpha: float, alpha2: float, k: int, n: int, c1: float) -> None:
    a, a2 = Fraction(alpha), Fraction(alpha2)
    excess = vertical_tokens(a, a2, k, n) - geometric(a, n)
    exact = (1 + n * Fraction(c1)) * excess / (n * k * geometric(a, n))
    got = vertical_c2_threshold(alpha, alpha2, k, n, c1)
    if exact == 0 or float(exact) < 1e-250:  # α or α2 tiny: the true value underflows
        assert got <= 1e-250
    else:
        assert rel_err(got, exact) <= RTOL


@given(st.lists(st.tuples(alphas, costs), min_size=0, max_size=30))
def test_horizontal_ewif(pairs: list[tuple[float, float]]) -> None:
    a = [Fraction(p[0]) for p in pairs]
    c = [Fraction(p[1]) for p in pairs]
    numerator, prefix = Fraction(1), Fraction(1)
    for a_i in a:
        prefix *= a_i
        numerator += prefix
    exact = numerator / (1 + sum(c, Fraction(0)))
    got = horizontal_ewif([p[0] for p in pairs], [p[1] for p in pairs])
    assert rel_err(got, exact) <= RTOL


def test_vectorised_results_match_scalar_calls_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    alpha = np.concatenate([rng.uniform(0, 1, 50), 1 - rng.uniform(0, 1e-9, 50)])
    k = rng.integers(0, 50, 100)
    c = rng.uniform(0, 1, 100)
    vector = sd_ewif(alpha, k, c)
    scalar = [sd_ewif(float(a), int(kk), float(cc)) for a, kk, cc in zip(alpha, k, c, strict=True)]
    np.testing.assert_array_equal(vector, scalar)
