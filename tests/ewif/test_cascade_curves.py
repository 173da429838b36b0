"""Cascade priced by measured pass-cost curves: exact against enumeration, reductions, errors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif import Pgf
from ewif.kernel.cascade import Cascade
from ewif.theory.theorems import phi
from tests.ewif.test_cascade import alpha_matrix, enumerate_call

NAN = np.nan


def curve_price(curves):
    """c_i(m) in Fractions: the table, then the line through the last two points (flat if
    it falls; a one-point curve is flat) — the documented rule, written out."""

    def price(i, m):
        y = curves[i]
        if m <= len(y):
            return y[m - 1]
        rise = y[-1] - y[-2] if len(y) > 1 else Fraction(0)
        return y[-1] + max(rise, Fraction(0)) * (m - len(y))

    return price


target_values = st.sampled_from(
    [Fraction(1, 2), Fraction(1), Fraction(197, 100), Fraction(179, 100), Fraction(207, 100), 3]
)
drafter_values = st.sampled_from(
    [Fraction(0), Fraction(1, 100), Fraction(3, 100), Fraction(1, 20), Fraction(1, 10)]
)
small_alpha = st.sampled_from([Fraction(0), Fraction(1, 2), Fraction(3, 4), Fraction(1)])


@settings(max_examples=40)
@given(
    st.lists(small_alpha, min_size=6, max_size=6),
    st.lists(st.integers(0, 2), min_size=6, max_size=6),
    st.sampled_from(["tokens", "rounds"]),
    st.lists(target_values, min_size=0, max_size=3),
    st.lists(st.lists(drafter_values, min_size=1, max_size=3), min_size=3, max_size=3),
)
def test_curves_match_exhaustive_enumeration(alphas, ks, fill, target_tail, drafter_curves):
    K = [[ks[0], ks[1], ks[2]], [0, ks[3], ks[4]], [0, 0, ks[5]]]
    curves = [[Fraction(1), *target_tail], *drafter_curves]
    alpha = [[None] * 4 for _ in range(4)]
    for (r, j), a in zip([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], alphas, strict=True):
        alpha[r][j] = a
    af = np.array([[NAN if v is None else float(v) for v in row] for row in alpha])
    try:
        casc = Cascade(af, None, K, fill=fill, cost_curve=[[float(v) for v in c] for c in curves])
    except ValueError:
        return  # unused drafter / empty target row
    outcomes = enumerate_call(0, alpha, K, curve_price(curves), fill)
    assert sum(p for p, _, _ in outcomes) == 1
    tokens = sum(p * t for p, t, _ in outcomes)
    cost = sum(p * c for p, _, c in outcomes)
    pmf = np.zeros(max(t for _, t, _ in outcomes) + 1)
    for p, t, _ in outcomes:
        pmf[t] += float(p)
    assert casc.tokens_pgf().isclose(Pgf(pmf), atol=1e-13)
    assert casc.expected_cost() == pytest.approx(float(cost), rel=1e-12)
    assert casc.ewif() == pytest.approx(float(tokens / cost), rel=1e-12)


@pytest.mark.parametrize(
    ("curve", "k", "c0"),
    [
        ([1, 1.97, 1.79, 2.07], 1, 1.97),
        ([1, 1.97, 1.79, 2.07], 2, 1.79),  # a bigger review can be cheaper (measured)
        ([1, 1.97, 1.79, 2.07], 5, 2.07 + 2 * 0.28),  # beyond m = 4: slope of the last two
        ([1, 2, 1.5], 6, 1.5),  # falling end: flat, never cheaper
        ([1], 9, 1.0),  # one point: flat
    ],
)
def test_single_drafter_review_cost_is_the_curve_at_k_plus_1(curve, k, c0):
    a = 0.7
    casc = Cascade(alpha_matrix(1, {(0, 1): a}), None, [[k]], cost_curve=[curve, [0.05]])
    assert casc.expected_cost() == pytest.approx(c0 + k * 0.05, rel=1e-14)
    assert casc.ewif() == pytest.approx(phi(a, k).mean() / (c0 + k * 0.05), rel=1e-12)
    assert casc.cost.tolist() == [1.0, 0.05] and casc.cost_per_token.tolist() == [0, 0]
    assert casc.pass_cost.kind == "curve" and casc.cost_curve[0].tolist() == curve


@settings(max_examples=30)
@given(
    st.lists(st.floats(0.05, 0.95), min_size=3, max_size=3),
    st.lists(st.floats(0, 0.2), min_size=2, max_size=2),
    st.lists(st.floats(0, 0.05), min_size=3, max_size=3),
    st.integers(2, 5),
    st.integers(1, 6),
    st.integers(1, 6),
)
def test_affine_curves_equal_cost_per_token(alphas, cost, cpt, M, k1, k2):
    a = alpha_matrix(2, {(0, 1): alphas[0], (0, 2): alphas[1], (1, 2): alphas[2]})
    cost = [1.0, *cost]
    cpt = [0.0, *cpt[1:]]  # target m = 1 must cost 1: cost[0] + cpt[0] = 1
    curves = [[c + s * m for m in range(1, M + 1)] for c, s in zip(cost, cpt, strict=True)]
    K = [[k1, 0], [0, k2]]
    affine = Cascade(a, cost, K, cost_per_token=cpt)
    curved = Cascade(a, None, K, cost_curve=curves)  # drafts exceed M: extrapolated
    assert curved.ewif() == pytest.approx(affine.ewif(), rel=1e-12)
    np.testing.assert_allclose(curved.passes_per_step(), affine.passes_per_step(), rtol=1e-14)


def test_pass_sizes_are_exact_and_add_up():
    a = alpha_matrix(2, {(0, 1): 0.8, (0, 2): 0.5, (1, 2): 0.6})
    casc = Cascade(a, None, [[3, 2], [0, 4]], cost_curve=[[1, 1.5, 1.2], [0.1, 0.2], [0.0]])
    sizes = casc.pass_sizes()
    assert [s.passes for s in sizes] == pytest.approx(list(casc.passes_per_step()), rel=1e-14)
    assert sum(s.total_cost for s in sizes) == pytest.approx(casc.expected_cost(), rel=1e-14)
    target = sizes[0]
    assert target.counts[:4].tolist() == [0, 0, 0, 0]  # D >= k11 + k12 = 5: m >= 6
    assert target.support[0] == 6 and target.pmf.sum() == pytest.approx(1.0)
    assert target.mean_m == pytest.approx(
        1 + np.arange(target.counts.size - 1) @ target.counts[1:], rel=1e-14
    )
    assert sizes[2].support.tolist() == [1]  # the leaf only generates
    assert sizes[1].support.min() == 5  # drafter 1 reviews 4 leaf tokens: m = 5


def test_to_cascade_uses_the_curves():
    import dataclasses

    from ewif.files.presets import load_preset

    ms = load_preset("flan-t5-ms")
    curves = ([1.0, 1.1, 1.5], [ms.cost[1], 0.03], [ms.cost[2]], [0.0])
    cs = dataclasses.replace(ms, cost_curve=tuple(np.array(c) for c in curves))
    c = cs.to_cascade(models=["flan-t5-xxl", "flan-t5-small"], K=[[4]])
    assert [x.tolist() for x in c.cost_curve] == [curves[0], curves[2]]
    # review of 4 tokens: m = 5, two steps of 0.4 beyond the last point m = 3
    assert c.expected_cost() == pytest.approx(1.5 + 0.4 * 2 + 4 * ms.cost[2], rel=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cost": [1, 0.1], "cost_per_token": [0, 0], "cost_curve": [[1], [0.1]]}, "not both"),
        ({"cost": [1, 0.2], "cost_curve": [[1], [0.1]]}, r"m = 1 values \[1.0, 0.1\]"),
        ({"cost": [1, 0.1, 0], "cost_curve": [[1], [0.1]]}, "m = 1 values"),
        ({"cost": None}, "cost is required"),
        ({"cost": None, "cost_curve": [[1], [0.1], [0]]}, "shape"),
        ({"cost": None, "cost_curve": [[1], [-1]]}, r"cost_curve\[1\] \(model 1\)"),
        ({"cost": None, "cost_curve": [[1.5], [0.1]]}, r"cost_curve\[0\]\[0\]"),
    ],
)
def test_bad_cost_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Cascade(alpha_matrix(1, {(0, 1): 0.5}), K=[[3]], **kwargs)


def test_with_alpha_keeps_everything_but_the_acceptances():
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[0, 2], alpha[1, 2] = 0.8, 0.4, 0.6
    curves = [[1.0, 1.1, 1.3, 1.6], [0.2, 0.22, 0.25], [0.0]]
    c = Cascade(alpha, None, [[2, 1], [0, 2]], cost_curve=curves, catch_up=[False, True, False])
    other = alpha.copy()
    other[0, 1] = 0.5
    again = c.with_alpha(other)
    fresh = Cascade(other, None, [[2, 1], [0, 2]], cost_curve=curves, catch_up=[False, True, False])
    assert again.ewif() == pytest.approx(fresh.ewif(), rel=1e-15)
    assert again.catch_up.tolist() == c.catch_up.tolist() and again.fill == c.fill
    assert c.with_alpha(alpha).ewif() == pytest.approx(c.ewif(), rel=1e-15)
