"""Pass costs as curves in m: the extrapolation rule, expectations, affinity and validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ewif.kernel.pass_cost import PassCost


def test_curve_lookup_and_extrapolation_rule():
    pc = PassCost.from_curves([[1, 1.97, 1.79, 2.07], [0.1], [0.2, 0.4, 0.3], [0.0, 0.5]])
    m = np.arange(1, 8)
    # target: measured for m <= 4, then the line through (3, 1.79), (4, 2.07): slope 0.28
    np.testing.assert_allclose(pc.at(0, m), [1, 1.97, 1.79, 2.07, 2.35, 2.63, 2.91], rtol=1e-14)
    np.testing.assert_array_equal(pc.at(1, m), np.full(7, 0.1))  # one point: flat
    # falling last segment (0.4 -> 0.3): flat at the last value, never cheaper
    np.testing.assert_array_equal(pc.at(2, m), [0.2, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3])
    np.testing.assert_allclose(pc.at(3, m), 0.5 * (m - 1), rtol=1e-15)
    assert pc.at(0, 4) == 2.07 and pc.at(0, np.array([[1, 2]])).shape == (1, 2)
    assert pc.unit == 1.0 and pc.kind == "curve" and pc.n_models == 4


def test_expected_is_the_pmf_average():
    pc = PassCost.from_curves([[1, 1.97, 1.79, 2.07], [0.1]])
    pmf = np.array([0.0, 0.1, 0.2, 0.3, 0.0, 0.4])  # P(m), index = m
    assert pc.expected(0, pmf) == pytest.approx(0.1 + 0.2 * 1.97 + 0.3 * 1.79 + 0.4 * 2.35)
    assert pc.expected(1, pmf) == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"m_pmf\[0\]"):
        pc.expected(0, [0.5, 0.5])
    with pytest.raises(ValueError, match="m must hold integers >= 1"):
        pc.at(0, 0)


@given(
    st.lists(st.floats(0, 0.5), min_size=1, max_size=4),
    st.lists(st.floats(0, 0.1), min_size=2, max_size=5),
    st.integers(1, 60),
)
def test_affine_form(cost_tail, cpt, m):
    n1 = min(len(cost_tail) + 1, len(cpt))
    cost = np.array([1.0, *cost_tail])[:n1]
    cpt = np.array(cpt[:n1])
    pc = PassCost.affine(cost, cpt)
    for i in range(n1):
        assert pc.at(i, m) == pytest.approx(cost[i] + cpt[i] * m, rel=1e-14)
        assert pc.affine_params(i) == pytest.approx((cost[i], cpt[i]), rel=1e-12, abs=1e-15)
    assert pc.unit == cost[0] + cpt[0] and pc.kind == "affine"


def test_affine_detection_of_curves():
    pc = PassCost.from_curves([[1, 1.1, 1.2, 1.3], [0.2, 0.4, 0.3], [0.5], [1, 2, 4]])
    a, b = pc.affine_params(0)
    assert (a, b) == (pytest.approx(0.9), pytest.approx(0.1))
    assert not pc.is_affine(1)  # falls, then flat: not one line
    assert pc.affine_params(2) == (0.5, 0.0)  # flat
    assert not pc.is_affine(3)
    sub = pc.select([0, 2])
    assert sub.n_models == 2 and sub.at(1, 9) == 0.5


@pytest.mark.parametrize(
    ("curves", "match"),
    [
        ([[1, 2]], "at least one drafter"),
        ("1,2", "one curve"),
        ([[1], []], r"cost_curve\[1\] \(model 1\) is empty"),
        ([[1], [0.1, -0.2]], r"cost_curve\[1\] \(model 1\).*-0.2 at m = 2"),
        ([[1], [math.nan]], r"cost_curve\[1\].*nan"),
        ([[1, math.inf], [0.1]], r"cost_curve\[0\].*inf at m = 2"),
        ([[1], ["x"]], r"cost_curve\[1\] \(model 1\) must hold numbers, got 'x'"),
        ([[1], [None]], r"cost_curve\[1\].*None"),
        ([[1], [True]], r"cost_curve\[1\].*True"),
        ([[1], 0.5], r"cost_curve\[1\] \(model 1\) must be a list"),
        ([[2, 3], [0.1]], r"cost_curve\[0\]\[0\].*must be 1, got 2"),
    ],
)
def test_bad_curves(curves, match):
    with pytest.raises(ValueError, match=match):
        PassCost.from_curves(curves)


def test_curve_count_and_affine_errors():
    with pytest.raises(ValueError, match=r"one curve per model \(3\), got 2"):
        PassCost.from_curves([[1], [0.1]], n_models=3)
    with pytest.raises(ValueError, match=r"cost\[0\]"):
        PassCost.affine([2, 0.1])
    with pytest.raises(ValueError, match="cost_per_token must have shape"):
        PassCost.affine([1, 0.1], [0, 0, 0])
