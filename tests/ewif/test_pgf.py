"""The immutable ``Pgf`` type: evaluation, moments, sums (product), power, composition."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy
from hypothesis import given
from hypothesis import strategies as st

from ewif import Pgf


@st.composite
def pmfs(draw: st.DrawFn, max_len: int = 6) -> list[Fraction]:
    weights = draw(st.lists(st.integers(0, 9), min_size=1, max_size=max_len))
    weights[-1] += 1
    total = sum(weights)
    return [Fraction(w, total) for w in weights]


def as_pgf(pmf: list[Fraction]) -> Pgf:
    return Pgf([float(p) for p in pmf])


def convolve(p: list[Fraction], q: list[Fraction]) -> list[Fraction]:
    out = [Fraction(0)] * (len(p) + len(q) - 1)
    for (i, a), (j, b) in itertools.product(enumerate(p), enumerate(q)):
        out[i + j] += a * b
    return out


def assert_matches(g: Pgf, exact: list[Fraction]) -> None:
    for i, p in enumerate(exact):
        assert g.pmf(i) == pytest.approx(float(p), rel=1e-12, abs=1e-15)
    assert g.pmf(len(exact)) == 0.0


@given(pmfs())
def test_moments_match_exact_values(pmf: list[Fraction]) -> None:
    g = as_pgf(pmf)
    mean = sum(i * p for i, p in enumerate(pmf))
    variance = sum((i - mean) ** 2 * p for i, p in enumerate(pmf))
    assert g.mean() == pytest.approx(float(mean), rel=1e-12)
    assert g.variance() == pytest.approx(float(variance), rel=1e-12, abs=1e-15)
    assert g(1.0) == pytest.approx(1.0, rel=1e-12)


@given(pmfs(), pmfs())
def test_product_is_the_sum_of_independent_counts(p: list[Fraction], q: list[Fraction]) -> None:
    g, h = as_pgf(p), as_pgf(q)
    assert_matches(g * h, convolve(p, q))
    assert (g * h).mean() == pytest.approx(g.mean() + h.mean(), rel=1e-12)
    assert (g * h).variance() == pytest.approx(g.variance() + h.variance(), rel=1e-9, abs=1e-12)
    for x in (-0.7, 0.3, 0.9):
        assert (g * h)(x) == pytest.approx(g(x) * h(x), rel=1e-12, abs=1e-15)


@given(pmfs(max_len=4), st.integers(0, 5))
def test_power_is_repeated_product(p: list[Fraction], n: int) -> None:
    exact = [Fraction(1)]
    for _ in range(n):
        exact = convolve(exact, p)
    assert_matches(as_pgf(p) ** n, exact)


@given(pmfs(max_len=4), pmfs(max_len=4))
def test_compose_is_a_random_sum(p: list[Fraction], q: list[Fraction]) -> None:
    """``g(h(x))``: X ~ g independent copies of Y ~ h; Wald: mean = E[X] E[Y]."""
    exact = [Fraction(0)]
    power = [Fraction(1)]
    for p_i in p:
        exact = [a + p_i * b for a, b in itertools.zip_longest(exact, power, fillvalue=0)]
        power = convolve(power, q)
    g, h = as_pgf(p), as_pgf(q)
    composed = g.compose(h)
    assert_matches(composed, exact)
    assert composed.mean() == pytest.approx(g.mean() * h.mean(), rel=1e-12, abs=1e-15)
    assert composed(0.4) == pytest.approx(g(h(0.4)), rel=1e-12, abs=1e-15)


def test_point_pmf_and_trimming() -> None:
    assert Pgf.point(3).coefficients.tolist() == [0, 0, 0, 1]
    assert Pgf.point(0) == Pgf([1.0])
    g = Pgf([0.25, 0.75, 0.0, 0.0])
    assert g.max_value == 1
    np.testing.assert_array_equal(g.pmf(np.array([-1, 0, 1, 2])), [0, 0.25, 0.75, 0])
    assert g(np.array([0.0, 1.0])).tolist() == [0.25, 1.0]


def test_immutable_and_hashable() -> None:
    g = Pgf([0.5, 0.5])
    with pytest.raises(ValueError, match="read-only"):
        g.coefficients[0] = 1.0
    assert hash(g) == hash(Pgf([0.5, 0.5, 0.0]))
    assert g.isclose(Pgf([0.5 + 1e-14, 0.5 - 1e-14]))
    assert not g.isclose(Pgf([0.4, 0.6]))


def test_to_sympy() -> None:
    x = sympy.Symbol("x")
    expr = Pgf([0.25, 0.0, 0.75]).to_sympy(x)
    assert float(expr.subs(x, 2)) == 0.25 + 3.0


@pytest.mark.parametrize(
    ("coefficients", "message"),
    [
        ([], "non-empty"),
        ([[0.5, 0.5]], "1-D"),
        ([0.5, 0.6], "sum to 1"),
        ([1.2, -0.2], r"\[0, 1\]"),
        ([math.nan, 1.0], "finite"),
    ],
)
def test_bad_coefficients(coefficients, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Pgf(coefficients)


def test_bad_power_and_point() -> None:
    with pytest.raises(ValueError, match="n must be an integer >= 0"):
        Pgf([0.5, 0.5]) ** -1
    with pytest.raises(ValueError, match="value must be an integer >= 0"):
        Pgf.point(-2)
