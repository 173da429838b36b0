"""Theorems TD and TB in the kernel: a tree cascade whose trees are chains is Algorithm 1
(with catch-up, curves, logit rows and Theorem FL), closed forms of small trees, and the
configuration checks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from ewif.kernel.tree import Tree
from ewif.kernel.tree_cascade import TreeCascade

TARGET = [1.0, 1.2, 1.5, 1.7, 2.2, 2.6, 2.9, 3.5]


def _curve(draw, first: float) -> list[float]:
    steps = draw(st.lists(st.floats(0.0, 0.2), min_size=1, max_size=4))
    return list(np.cumsum([first, *steps]))


@settings(max_examples=40)
@given(st.data())
def test_a_chain_tree_is_the_chain(data) -> None:
    """SD and target > d > leaf with the leaf's chain as a tree review, every cost form."""
    a = data.draw(st.floats(0.0, 1.0))
    b = data.draw(st.floats(0.0, 1.0))
    k = data.draw(st.integers(1, 5))
    k1 = data.draw(st.integers(1, 4))
    flags = data.draw(st.lists(st.booleans(), min_size=2, max_size=2))
    curves = [TARGET, _curve(data.draw, 0.1), _curve(data.draw, 0.02)]
    rows = [0.0, data.draw(st.sampled_from([0.0, 0.01])), 0.0]
    lengths = [1, 3, 17]
    sd = dict(cost_curve=curves[:2], catch_up=[False, flags[0]], row_cost=rows[:2])
    chain = Cascade([[0, a], [0, 0]], None, [[k]], **sd)
    tree = TreeCascade([[0, a], [0, 0]], None, [[k]], tree=(0, 1, Tree.chain(k)), **sd)
    assert tree.ewif() == pytest.approx(chain.ewif(), rel=1e-12)
    assert tree.ewif(lengths) == pytest.approx(chain.ewif(lengths), rel=1e-12)
    alpha = [[0, a, 0.5], [0, 0, b], [0, 0, 0]]
    three = dict(cost_curve=curves, catch_up=[False, *flags], row_cost=rows)
    K = [[k1, 0], [0, k]]
    chain = Cascade(alpha, None, K, **three)
    tree = TreeCascade(alpha, None, K, tree=(1, 2, Tree.chain(k)), **three)
    assert tree.ewif() == pytest.approx(chain.ewif(), rel=1e-12)
    assert tree.ewif(lengths) == pytest.approx(chain.ewif(lengths), rel=1e-12)
    for x, y in zip(tree.pass_sizes(), chain.pass_sizes(), strict=True):
        assert np.allclose(x.counts[: y.counts.size], y.counts[: x.counts.size])


@settings(max_examples=30)
@given(st.data())
def test_no_siblings_is_the_chain(data) -> None:
    a, b, c = (data.draw(st.floats(0.0, 1.0)) for _ in range(3))
    flags = data.draw(st.lists(st.booleans(), min_size=2, max_size=2))
    K = [
        [data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))],
        [0, data.draw(st.integers(0, 3))],
    ]
    kw = dict(cost_curve=[TARGET, [0.1, 0.15], [0.02, 0.03]], catch_up=[False, *flags])
    alpha = [[0, a, b], [0, 0, c], [0, 0, 0]]
    chain = Cascade(alpha, None, K, **kw)
    rank = {(0, 1): [a, (1 - a) / 2], (0, 2): [b, (1 - b) / 3]}
    tree = TreeCascade(alpha, None, K, rank=rank, siblings=[0, 0, 0], **kw)
    assert tree.ewif() == chain.ewif() and tree.ewif(9) == pytest.approx(chain.ewif(9), rel=1e-12)


@pytest.mark.parametrize("h", [0.0, 0.03])
def test_star_tree_theorem_td(h: float) -> None:
    """Root with three children: T = 2 w.p. σ = p1 + p2 + p3; the target pays c0(4); the
    drafter one pass over its tail, which holds the accepted leaf w.p. σ."""
    p, c1 = [0.5, 0.2, 0.1], [0.1, 0.16, 0.2]
    c = TreeCascade(
        [[0, 0.5], [0, 0]],
        None,
        [[3]],
        cost_curve=[TARGET, c1],
        catch_up=[False, True],
        row_cost=[0.0, h],
        rank={(0, 1): p},
        tree=(0, 1, Tree([-1, 0, 0, 0])),
    )
    sigma = sum(p)
    assert c.expected_tokens() == pytest.approx(1 + sigma)
    drafter = (1 - sigma) * c1[0] + sigma * (c1[1] - h)
    assert c.model_step_costs() == pytest.approx([TARGET[3], drafter])
    # Theorem FL, N = 1: the first step's drafter pass feeds the prompt's last token only
    assert c.ewif(1) == pytest.approx(1 / (TARGET[3] + c1[0]))


def test_level_passes_theorem_td() -> None:
    """Root - 2 children - one of them with 2 children: levels feed 1 then 1 node; a
    proposer instead makes 4 lookups."""
    tree = Tree([-1, 0, 0, 1, 1])
    p = [0.6, 0.3]
    kw = dict(cost_curve=[TARGET, [0.1, 0.14, 0.3]], rank={(0, 1): p}, tree=(0, 1, tree))
    neural = TreeCascade([[0, 0.6], [0, 0]], None, [[4]], **kw)
    assert neural.passes_per_step().tolist() == [1.0, 2.0]
    assert neural.model_step_costs() == pytest.approx([TARGET[4], 0.2])
    proposer = TreeCascade([[0, 0.6], [0, 0]], None, [[4]], proposers=[False, True], **kw)
    assert proposer.model_step_costs() == pytest.approx([TARGET[4], 0.4])
    f = [1, 0.6, 0.3, 0.36, 0.18]
    assert neural.expected_tokens() == pytest.approx(sum(f))


@pytest.mark.parametrize("catch_up", [False, True])
def test_siblings_theorem_tb(catch_up: bool) -> None:
    """SD k = 1 with s siblings: T = 2 w.p. a + σ, the target reviews 2 + s positions, a
    KV-cached drafter's tail holds two tokens after a main or a sibling acceptance."""
    a, p = 0.5, [0.5, 0.2, 0.1]
    c1 = [0.1, 0.25]
    for s in (1, 2):
        c = TreeCascade(
            [[0, a], [0, 0]],
            None,
            [[1]],
            cost_curve=[TARGET, c1],
            catch_up=[False, catch_up],
            rank={(0, 1): p},
            siblings=[0, s],
        )
        sigma = sum(p[1 : 1 + s])
        assert c.tokens_pgf().coefficients.tolist() == pytest.approx([0, 1 - a - sigma, a + sigma])
        drafter = (1 - a - sigma) * c1[0] + (a + sigma) * c1[1] if catch_up else c1[0]
        assert c.model_step_costs() == pytest.approx([TARGET[1 + s], drafter])


def test_a_tree_at_the_bottom() -> None:
    """target > d (k = 1) > Max-Gram star of two: d's call yields 2 tokens w.p. σ'."""
    a, sigma = 0.7, 0.6
    c = TreeCascade(
        [[0, a, 0.2], [0, 0, 0.4], [0, 0, 0]],
        None,
        [[1, 0], [0, 2]],
        cost_curve=[TARGET, [0.1, 0.12, 0.15], [0.0]],
        rank={(1, 2): [0.4, 0.2]},
        tree=(1, 2, Tree([-1, 0, 0])),
        proposers=[False, False, True],
    )
    assert c.expected_tokens() == pytest.approx(1 + (1 - sigma) * a + sigma * (a + a * a))
    target = (1 - sigma) * TARGET[1] + sigma * TARGET[2]
    assert c.model_step_costs() == pytest.approx([target, 0.15, 0.0])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(K=[[2, 1], [0, 2]], tree=(0, 1, Tree.chain(2))), r"K row 1 must give the tree's"),
        (
            dict(K=[[2, 0], [0, 3]], tree=(1, 2, Tree.chain(2))),
            r"must be the tree's draft tokens, 2",
        ),
        (dict(K=[[2, 0], [0, 2]], tree=(0, 1, Tree.chain(2))), r"drafter 1 must be a leaf"),
        (dict(K=[[2, 0], [0, 2]], tree=(1, 2, Tree([-1, 0, 0]))), r"node 2 has rank 2"),
        (dict(K=[[1, 0], [0, 1]], siblings=[0, 0, 1]), r"siblings\[2\] = 1 but drafter 2 has no"),
        (dict(K=[[1, 0], [0, 1]], siblings=[0, 2, 0]), r"needs ranks up to 3"),
        (dict(K=[[1, 0], [0, 1]], siblings=[1, 0, 0]), r"one count per model .*0 for the target"),
        (
            dict(K=[[1, 0], [0, 1]], rank={(0, 1): [0.5, 0.1]}),
            r"must start with p_1 = alpha\[0\]\[1\] = 0.7",
        ),
        (dict(K=[[1, 0], [0, 1]], rank={(0, 1): [0.7, 0.4]}), r"sum to at most 1"),
        (
            dict(
                K=[[2, 0], [0, 1]],
                tree=(1, 2, Tree.chain(1)),
                proposers=[False, False, True],
                catch_up=[False, True, True],
            ),
            r"model 2 is a proposer",
        ),
    ],
)
def test_bad_configurations(kw, match) -> None:
    K = kw.pop("K")
    with pytest.raises(ValueError, match=match):
        TreeCascade(
            [[0, 0.7, 0.5], [0, 0, 0.6], [0, 0, 0]],
            None,
            K,
            cost_curve=[TARGET, [0.1], [0.0]],
            **kw,
        )
