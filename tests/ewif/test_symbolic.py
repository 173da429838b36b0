"""Symbolic proofs (sympy) and agreement of the numeric functions with their sympy twins."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import ewif
from ewif.theory import symbolic

rationals = st.fractions(0, 1, max_denominator=40)


def test_theorem_4_1_for_symbolic_k() -> None:
    assert symbolic.prove_phi_closed_form(None)
    assert symbolic.prove_phi_mean(None)


@pytest.mark.parametrize("k", range(6))
def test_theorem_4_1_for_each_small_k(k: int) -> None:
    assert symbolic.prove_phi_closed_form(k)
    assert symbolic.prove_phi_mean(k)
    assert symbolic.prove_T_monomial(k)
    assert symbolic.prove_phi_gap(k)


@pytest.mark.parametrize(("k", "n"), [(1, 1), (2, 2), (3, 1)])
def test_c2_threshold_is_the_unique_root(k: int, n: int) -> None:
    assert symbolic.prove_c2_threshold(k, n)


@pytest.mark.parametrize("k", range(1, 6))
def test_corollary_4_6_and_reduction_to_4_2(k: int) -> None:
    assert symbolic.prove_horizontal_gradient(k)


def test_proofs_reject_a_wrong_closed_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deciders can fail: with (αx)^k instead of (αx)^(k+1) every proof is refuted."""

    def wrong(a, k, var=symbolic.x):
        return 1 + (var - 1) * (1 - (a * var) ** k) / (1 - a * var)

    monkeypatch.setattr(symbolic, "phi_closed_form", wrong)
    assert not symbolic.prove_phi_closed_form(None)
    assert not symbolic.prove_phi_closed_form(2)
    assert not symbolic.prove_phi_mean(None)


def test_composition_is_not_the_power_symbolically() -> None:
    """``φ(φ(α))`` and ``φ(α)²`` differ as polynomials (k = 1), so the composition reading of
    Theorem 4.3 is a different formula, not a rewriting of the power."""
    a, a2 = symbolic.alpha, symbolic.alpha2
    f = symbolic.phi_polynomial(a2, 1)
    composed = f.subs(symbolic.x, f.subs(symbolic.x, a))
    powered = f.subs(symbolic.x, a) ** 2
    assert sympy.expand(composed - powered) != 0


def q(value: Fraction) -> sympy.Rational:
    return sympy.Rational(value.numerator, value.denominator)


@settings(max_examples=30)
@given(rationals, rationals, st.integers(0, 5), st.integers(0, 4), rationals, rationals)
def test_numeric_twins_agree(a, a2, k, n, c1, c2) -> None:
    if a == 1:
        a = Fraction(39, 40)  # the symbolic closed forms are 0/0 at α = 1
    expected = {
        "sd": symbolic.sd_ewif(q(a), k, q(c1)),
        "vertical": symbolic.vertical_ewif(q(a), q(a2), k, n, q(c1), q(c2)),
        "T": symbolic.T_alpha(q(a), symbolic.phi_polynomial(q(a2), k)),
    }
    got = {
        "sd": ewif.sd_ewif(float(a), k, float(c1)),
        "vertical": ewif.vertical_ewif(float(a), float(a2), k, n, float(c1), float(c2)),
        "T": ewif.T(float(a), ewif.phi(float(a2), k)),
    }
    if k >= 1 and n >= 1:
        expected["c2*"] = symbolic.vertical_c2_threshold(q(a), q(a2), k, n, q(c1))
        got["c2*"] = ewif.vertical_c2_threshold(float(a), float(a2), k, n, float(c1))
    for name, value in expected.items():
        assert got[name] == pytest.approx(float(value), rel=1e-12, abs=1e-300), name


@settings(max_examples=30)
@given(st.lists(st.tuples(rationals, rationals), min_size=1, max_size=5))
def test_horizontal_twins_agree(pairs) -> None:
    alphas = [q(p[0]) for p in pairs]
    costs = [q(p[1]) for p in pairs]
    value = float(symbolic.horizontal_ewif(alphas, costs))
    gradient = [float(g) for g in symbolic.horizontal_gradient(alphas, costs)]
    floats_a = [float(p[0]) for p in pairs]
    floats_c = [float(p[1]) for p in pairs]
    assert ewif.horizontal_ewif(floats_a, floats_c) == pytest.approx(value, rel=1e-13)
    np.testing.assert_allclose(
        ewif.horizontal_gradient(floats_a, floats_c).alpha, gradient, rtol=1e-13, atol=1e-300
    )
