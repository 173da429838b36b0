"""simulate's own statement of the contract (simulate.contract) and of pass prices
(simulate.prices) agree with ewif's, which they restate rather than import: the leaf rule and
the drafters a review call reaches on every upper-triangular K, and every price to the bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ewif.base.row_cost import max_row_cost, max_row_step
from ewif.files.model_set import ModelSet
from ewif.kernel.budgets import FILLS, drafters_reached, is_leaf, rows_of
from ewif.kernel.pass_cost import PassCost
from simulate import contract
from simulate.prices import Prices


@st.composite
def budgets(draw) -> np.ndarray:
    """An upper-triangular ``n×n`` K with entries 0..3 (many zero rows: leaves)."""
    n = draw(st.integers(1, 5))
    K = np.zeros((n, n), dtype=np.int64)
    for r in range(n):
        for j in range(r, n):
            K[r, j] = draw(st.integers(0, 3))
    return K


@given(budgets())
def test_the_leaf_rule_and_the_drafters_reached_are_ewifs(K):
    n = K.shape[0]
    assert [contract.is_leaf(K, j) for j in range(n + 1)] == [is_leaf(K, j) for j in range(n + 1)]
    assert [contract.is_leaf(K.tolist(), j) for j in range(n + 1)] == [
        is_leaf(K, j) for j in range(n + 1)
    ]
    for r in range(n):  # every model with a K row (the last one reviews nobody)
        assert contract.reached(K, r) == set(drafters_reached(r, rows_of(K, r)))
    assert contract.reached(K, n) == set()


def test_the_fills_and_a_hand_example():
    assert contract.FILLS == FILLS
    K = [[2, 0, 1], [0, 3, 0], [0, 0, 0]]  # target: d1 and d3; d1 reviews with d2; d3 last
    assert [contract.is_leaf(K, j) for j in range(4)] == [False, False, True, True]
    assert contract.reached(K, 0) == {1, 2, 3} and contract.reached(K, 1) == {2}


curve = st.lists(st.floats(0.0, 5.0), min_size=1, max_size=6)


@given(
    st.lists(curve, min_size=2, max_size=4),
    st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4),
    st.booleans(),
)
def test_prices_from_curves_are_pass_costs_to_the_bit(curves, rows, with_rows):
    curves = [[1.0, *curves[0][1:]], *curves[1:]]
    row_cost = row_step = None
    if with_rows:  # each at most what its curve admits; the step at most what is left
        row_cost = [min(f, max_row_cost(c)) for f, c in zip(rows, curves, strict=False)]
        row_step = [
            min(f, max(max_row_step(c, h), 0.0))
            for f, c, h in zip(rows[::-1], curves, row_cost, strict=False)
        ]
    table = PassCost.from_curves(curves, row_cost=row_cost, row_step=row_step)
    prices = Prices.from_curves(curves, row_cost, row_step)
    m = np.arange(1, 12)
    for rows_returned in (np.minimum(m, 2), np.ones_like(m)):
        for i in range(len(curves)):
            assert np.array_equal(prices.at(i, m), table.at(i, m))
            assert np.array_equal(
                prices.at_rows(i, m, rows_returned), table.at_rows(i, m, rows_returned)
            )
    assert prices.unit == table.unit


@pytest.mark.parametrize("row_cost", [None, [0.0, 0.01, 0.0]])
def test_prices_of_an_affine_set_are_its_pass_costs(row_cost):
    ms = ModelSet(
        models=("t", "d", "e"),
        cost=np.array([1.0, 0.2, 0.05]),
        cost_per_token=np.array([0.0, 0.02, 0.0]),
        alpha={1.0: np.full((3, 3), 0.5)},
        row_cost=None if row_cost is None else np.array(row_cost),
    )
    for idx in ([0, 1, 2], [0, 2]):
        prices, table = Prices.of(ms, idx), ms.pass_cost.select(idx)
        m = np.arange(1, 9)
        for i in range(len(idx)):
            assert np.array_equal(prices.at(i, m), table.at(i, m))
            assert np.array_equal(prices.at_rows(i, m, 1), table.at_rows(i, m, 1))
        assert prices.unit == table.unit
