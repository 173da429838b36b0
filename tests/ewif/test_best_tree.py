"""Theorem TO: the best tree of Sequoia's programme equals brute force over every tree of at
most 8 nodes (every parent list with every ranking of children from 1..3, any rank vector;
and every plane tree with 8 ranks, decreasing vectors), for every size and depth bound."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.tree import tree_tokens
from ewif.search.best_tree import best_tree, best_trees

NODES = 8


@functools.cache
def _shapes(n: int, ranks: tuple[int, ...]) -> tuple:
    """Every tree of exactly ``n`` nodes whose children take distinct ranks from ``ranks``:
    a shape is a tuple of (rank, subshape)."""
    if n == 1:
        return ((),)
    out = []
    for used in range(1, len(ranks) + 1):
        for chosen in itertools.combinations(ranks, used):
            for sizes in _compositions(n - 1, used):
                for subs in itertools.product(*(_shapes(s, ranks) for s in sizes)):
                    out.append(tuple(zip(chosen, subs, strict=True)))
    return tuple(out)


@functools.cache
def _plane(n: int) -> tuple:
    """Every plane tree of ``n`` nodes (children ranked 1, 2, … in order)."""
    if n == 1:
        return ((),)
    out = []
    for used in range(1, n):
        for sizes in _compositions(n - 1, used):
            for subs in itertools.product(*(_plane(s) for s in sizes)):
                out.append(tuple(zip(range(1, used + 1), subs, strict=True)))
    return tuple(out)


def _compositions(total: int, parts: int):
    if parts == 1:
        yield (total,)
        return
    for first in range(1, total - parts + 2):
        for rest in _compositions(total - first, parts - 1):
            yield (first, *rest)


def _flatten(shape) -> tuple[list[int], list[int]]:
    parents, ranks = [-1], [0]
    stack = [(0, shape)]
    while stack:
        v, kids = stack.pop()
        for rank, sub in kids:
            parents.append(v)
            ranks.append(rank)
            stack.append((len(parents) - 1, sub))
    return parents, ranks


@functools.cache
def _table(plane: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All trees of <= 8 nodes as padded arrays: parents, ranks (0 = no node), size, height."""
    shapes = [
        s for n in range(1, NODES + 1) for s in (_plane(n) if plane else _shapes(n, (1, 2, 3)))
    ]
    par = np.zeros((len(shapes), NODES), dtype=np.int64)
    rk = np.zeros((len(shapes), NODES), dtype=np.int64)
    size = np.zeros(len(shapes), dtype=np.int64)
    height = np.zeros(len(shapes), dtype=np.int64)
    for t, shape in enumerate(shapes):
        parents, ranks = _flatten(shape)
        depth = [0] * len(parents)
        for v in range(1, len(parents)):
            depth[v] = depth[parents[v]] + 1
        par[t, : len(parents)], rk[t, : len(parents)] = parents, ranks
        size[t], height[t] = len(parents), max(depth)
    return par, rk, size, height


def _brute(p: list[float], plane: bool) -> np.ndarray:
    """``best[m, d]``: the most expected tokens over every enumerated tree of <= m nodes and
    depth <= d, each tree's value Σ_v f(v) computed node by node."""
    par, rk, size, height = _table(plane)
    pv = np.concatenate([[0.0], p])
    f = np.zeros(par.shape)
    f[:, 0] = 1.0
    for v in range(1, NODES):
        f[:, v] = np.where(v < size, f[np.arange(len(f)), par[:, v]] * pv[rk[:, v]], 0.0)
    value = f.sum(axis=1)
    best = np.zeros((NODES + 1, NODES))
    for m in range(1, NODES + 1):
        for d in range(NODES):
            best[m, d] = value[(size <= m) & (height <= d)].max()
    return best


def test_the_enumeration_is_complete() -> None:
    # trees with children ranked from 3 labels (ternary cardinal trees): C(3n, n)/(2n + 1);
    # plane trees: Catalan numbers
    assert [len(_shapes(n, (1, 2, 3))) for n in range(1, 9)] == [
        1,
        3,
        12,
        55,
        273,
        1428,
        7752,
        43263,
    ]
    assert [len(_plane(n)) for n in range(1, 9)] == [1, 1, 2, 5, 14, 42, 132, 429]


@settings(max_examples=25)
@given(st.lists(st.floats(0.0, 1.0), min_size=3, max_size=3), st.floats(0.05, 1.0))
def test_best_tree_equals_brute_force_any_rank_order(raw, scale) -> None:
    total = sum(raw)
    p = [x * scale / total for x in raw] if total else raw
    table = best_trees(p, NODES, NODES - 1)
    assert np.allclose(table.values[1:], _brute(p, plane=False)[1:], rtol=1e-12, atol=1e-15)


@settings(max_examples=25)
@given(st.lists(st.floats(0.0, 1.0), min_size=8, max_size=8), st.floats(0.05, 1.0))
def test_best_tree_equals_brute_force_eight_ranks(raw, scale) -> None:
    total = sum(raw)
    p = sorted((x * scale / total for x in raw), reverse=True) if total else raw
    table = best_trees(p, NODES, NODES - 1)
    assert np.allclose(table.values[1:], _brute(p, plane=True)[1:], rtol=1e-12, atol=1e-15)


@settings(max_examples=50)
@given(
    st.lists(st.floats(0.0, 0.12), min_size=1, max_size=8),
    st.integers(1, 40),
    st.integers(0, 9),
)
def test_the_tree_returned_has_the_value_and_the_bounds(p, nodes, depth) -> None:
    best = best_tree(p, nodes, depth)
    assert best.tree.size <= nodes and best.tree.height <= depth
    assert tree_tokens(best.parents, p, best.ranks).mean() == pytest.approx(best.value, rel=1e-12)


def test_edges() -> None:
    assert best_tree([0.8], 1, 5).parents == (-1,) and best_tree([0.8], 1, 5).value == 1.0
    assert best_tree([0.8], 10, 0).value == 1.0
    chain = best_tree([0.8], 10, 3)  # one rank: the chain of depth 3
    assert chain.parents == (-1, 0, 1, 2) and chain.value == pytest.approx(1 + 0.8 + 0.64 + 0.512)
    assert best_tree([0.0, 0.0], 10, 3).parents == (-1,)  # nothing is ever accepted
    assert best_tree([1.0, 0.0], 4, 9).parents == (-1, 0, 1, 2)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0.5], 0, 3), r"nodes must be an integer >= 1, got 0"),
        (([0.5], 4, -1), r"depth must be an integer >= 0, got -1"),
        (([0.5, 0.6], 4, 2), r"sum to at most 1"),
        (([-0.5], 4, 2), r"p_1 = -0.5"),
        (([float("nan")], 4, 2), r"p_1 = nan"),
        (([0.5], 10**6, 2), r"nodes must be at most"),
    ],
)
def test_bad_arguments(args, match) -> None:
    with pytest.raises(ValueError, match=match):
        best_tree(*args)
