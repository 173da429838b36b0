"""The tree theory (Theorems TT, TD, TB with CU and FL) against its witness
(:mod:`simulate.tree_witness`, explicit token lists): the exact EWIF lies inside the
witness's 99.9 % interval for random trees of depth <= 6 and <= 32 nodes, cascades with
siblings and trees at the bottom, with catch-up, curves and logit rows, and proposers that find
fewer candidates than asked (Theorem TP; fixed seeds); and the witness rejects the law that
leaves the catch-up out, and the law that prices a proposer's tree at its full size."""

from __future__ import annotations

import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.base.row_cost import max_row_step
from ewif.kernel.tree import Tree
from ewif.kernel.tree_cascade import TreeCascade
from simulate.stats import ratio_estimate
from simulate.tree_compare import witness

LEVEL = 0.999


def _ewif(c: TreeCascade, streams: int = 120, steps: int = 30, seed: int = 0):
    run = witness(c, seed).run(streams, steps)
    x, y = run.tokens, run.cost
    return ratio_estimate(x.sum(), y.sum(), x @ x, y @ y, x @ y, x.size, LEVEL)


@st.composite
def trees(draw, max_nodes: int = 32, max_depth: int = 6, ranks: int = 3) -> Tree:
    n = draw(st.integers(2, max_nodes))
    parents, rank, depth, used = [-1], [0], [0], {}
    for _ in range(1, n):
        free = [
            u for u in range(len(parents)) if depth[u] < max_depth and len(used.get(u, ())) < ranks
        ]
        if not free:
            break
        p = draw(st.sampled_from(free))
        b = draw(st.sampled_from([b for b in range(1, ranks + 1) if b not in used.get(p, ())]))
        used.setdefault(p, set()).add(b)
        parents.append(p)
        rank.append(b)
        depth.append(depth[p] + 1)
    return Tree(parents, rank)


@st.composite
def vectors(draw, a: float, size: int = 3) -> list[float]:
    rest = draw(st.lists(st.floats(0.0, 1.0), min_size=size - 1, max_size=size - 1))
    room = (1 - a) * draw(st.floats(0.0, 1.0))
    total = sum(rest)
    return [a] + ([x * room / total for x in rest] if total else rest)


def _curve(draw, first: float) -> list[float]:
    steps = draw(st.lists(st.floats(0.0, 0.3), min_size=1, max_size=5))
    return list(np.cumsum([first, *steps]))


TARGET = [1.0, 1.1, 1.15, 1.3, 1.4, 1.6, 1.7, 2.0, 2.1, 2.4]


@settings(max_examples=10)
@given(st.data())
def test_a_tree_reviewed_by_the_target(data) -> None:
    tree = data.draw(trees())
    a = data.draw(st.floats(0.3, 0.9))
    p = data.draw(vectors(a))
    proposer = data.draw(st.booleans())
    catch_up = not proposer and data.draw(st.booleans())
    curve, h = _curve(data.draw, 0.1), data.draw(st.sampled_from([0.0, 0.02]))
    step = min(data.draw(st.sampled_from([0.0, 0.05])), max_row_step(curve, h))  # row step
    c = TreeCascade(
        [[0, a], [0, 0]], None, [[tree.size - 1]], cost_curve=[TARGET, curve],
        catch_up=[False, catch_up], row_cost=[0.0, h], row_step=[0.0, step],
        rank={(0, 1): p}, tree=(0, 1, tree), proposers=[False, proposer],
    )  # fmt: skip
    seed = zlib.crc32(repr((tree, p, catch_up)).encode())
    assert _ewif(c, seed=seed).contains(c.ewif())


@settings(max_examples=10)
@given(st.data())
def test_cascades_with_siblings_and_trees_at_the_bottom(data) -> None:
    a, b, c2 = (data.draw(st.floats(0.3, 0.9)) for _ in range(3))
    flags = [False, data.draw(st.booleans()), False]
    bottom = data.draw(trees(max_nodes=8, max_depth=3))
    with_tree = data.draw(st.booleans())
    k1, k2 = data.draw(st.integers(1, 3)), data.draw(st.integers(0, 2))
    k22 = bottom.size - 1 if with_tree else data.draw(st.integers(0 if k2 else 1, 3))
    K = [[k1, k2], [0, k22]]
    rank = {
        (0, 1): data.draw(vectors(a)),
        (0, 2): data.draw(vectors(b)),
        (1, 2): data.draw(vectors(c2)),
    }
    siblings = [0, data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2)) if k2 else 0]
    curve = _curve(data.draw, 0.1)
    step = min(data.draw(st.sampled_from([0.0, 0.05])), max_row_step(curve, 0.02))
    c = TreeCascade(
        [[0, a, b], [0, 0, c2], [0, 0, 0]], None, K, rank=rank, siblings=siblings,
        tree=(1, 2, bottom) if with_tree else None, proposers=[False, False, True],
        cost_curve=[TARGET, curve, [0.01]], catch_up=flags,
        row_cost=[0.0, 0.02, 0.0], row_step=[0.0, step, 0.0],
    )  # fmt: skip
    seed = zlib.crc32(repr((K, siblings, flags, with_tree)).encode())
    assert _ewif(c, seed=seed).contains(c.ewif())


def _caught(catch_up: bool) -> TreeCascade:
    return TreeCascade(
        [[0, 0.6], [0, 0]], None, [[6]], cost_curve=[TARGET, [0.1, 0.5, 0.9, 1.3]],
        catch_up=[False, catch_up], rank={(0, 1): [0.6, 0.3, 0.1]},
        tree=(0, 1, Tree([-1, 0, 0, 0, 1, 1, 2])),
    )  # fmt: skip


def test_the_witness_rejects_the_law_without_catch_up() -> None:
    estimate = _ewif(_caught(True), streams=300, steps=40, seed=7)
    assert estimate.contains(_caught(True).ewif())
    assert not estimate.contains(_caught(False).ewif())


def test_generations_of_n_tokens_theorem_fl() -> None:
    """E[C(N)] of a tree drafter with catch-up, the first step from the prefilled prompt."""
    c = _caught(True)
    for n in (1, 4, 9):
        costs = witness(c, seed=n).generation_costs(3000, n)
        se = costs.std(ddof=1) / np.sqrt(costs.size)
        assert abs(costs.mean() - c.generation_cost(n)) <= 3.29 * se + 1e-12


@st.composite
def presences(draw, size: int = 3) -> list[float]:
    """``q_1 > 0`` then non-increasing probabilities, each 0 or a ratio of at least 0.1 to
    the one before (a node present once in a million steps never shows in the witness)."""
    q = [draw(st.floats(0.2, 1.0))]
    for _ in range(size - 1):
        q.append(q[-1] * draw(st.one_of(st.just(0.0), st.floats(0.1, 1.0))))
    return q


@settings(max_examples=10)
@given(st.data())
def test_a_proposer_tree_with_missing_candidates_theorem_tp(data) -> None:
    tree = data.draw(trees(max_nodes=16, max_depth=4))
    a = data.draw(st.floats(0.3, 0.9))
    c = TreeCascade(
        [[0, a], [0, 0]], None, [[tree.size - 1]], cost_curve=[TARGET, [0.01]],
        catch_up=[data.draw(st.booleans()), False], rank={(0, 1): data.draw(vectors(a))},
        tree=(0, 1, tree), proposers=[False, True], presence={1: data.draw(presences())},
    )  # fmt: skip
    seed = zlib.crc32(repr((tree, c.presence[1].tolist(), c.catch_up)).encode())
    assert _ewif(c, seed=seed).contains(c.ewif())


@settings(max_examples=10)
@given(st.data())
def test_siblings_a_proposer_does_not_find_theorem_tp(data) -> None:
    a, b = (data.draw(st.floats(0.3, 0.9)) for _ in range(2))
    k1, k2 = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
    c = TreeCascade(
        [[0, a, b], [0, 0, 0.5], [0, 0, 0]], None, [[k1, k2], [0, 2]],
        cost_curve=[TARGET, _curve(data.draw, 0.1), [0.01]], catch_up=[True, True, False],
        rank={(0, 1): data.draw(vectors(a)), (0, 2): data.draw(vectors(b))},
        siblings=[0, data.draw(st.integers(0, 2)), data.draw(st.integers(1, 2))],
        proposers=[False, False, True], presence={2: data.draw(presences())},
    )  # fmt: skip
    seed = zlib.crc32(repr((k1, k2, c.siblings, c.presence[2].tolist())).encode())
    assert _ewif(c, seed=seed).contains(c.ewif())


def test_the_witness_rejects_a_proposer_tree_priced_at_full_size() -> None:
    def cascade(presence: dict | None) -> TreeCascade:
        return TreeCascade(
            [[0, 0.5], [0, 0]], None, [[6]], cost_curve=[TARGET, [0.01]],
            rank={(0, 1): [0.5, 0.2, 0.1]}, tree=(0, 1, Tree([-1, 0, 0, 0, 1, 1, 2])),
            proposers=[False, True], presence=presence,
        )  # fmt: skip

    estimate = _ewif(cascade({1: [1.0, 0.4, 0.1]}), streams=300, steps=40, seed=11)
    assert estimate.contains(cascade({1: [1.0, 0.4, 0.1]}).ewif())
    assert not estimate.contains(cascade(None).ewif())
