"""Theorem TT: the exact PGF of the tokens of a tree review, against enumeration of the walk;
trees and rank vectors checked at the boundary."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ewif
from ewif.kernel.tree import Tree, tree_tokens
from ewif.theory.theorems import phi


@st.composite
def trees(draw, max_nodes: int = 12, max_rank: int = 4):
    """A random tree with ranked children (ranks a random subset of 1..max_rank)."""
    n = draw(st.integers(1, max_nodes))
    parents, ranks, used = [-1], [0], {}
    for v in range(1, n):
        free = [u for u in range(v) if len(used.get(u, ())) < max_rank]
        p = draw(st.sampled_from(free))
        rank = draw(
            st.sampled_from([b for b in range(1, max_rank + 1) if b not in used.get(p, ())])
        )
        used.setdefault(p, set()).add(rank)
        parents.append(p)
        ranks.append(rank)
    return parents, ranks


@st.composite
def vectors(draw, size: int = 4):
    raw = draw(st.lists(st.floats(0.0, 1.0), min_size=size, max_size=size))
    scale = draw(st.floats(0.0, 1.0))
    total = sum(raw)
    return [x * scale / total for x in raw] if total > 0 else raw


def _enumerated(parents, ranks, p) -> dict[int, float]:
    """The law of the tokens by enumerating the reviewer's walk: at each node every rank
    outcome (and 'none of them'), moving on where a child has that rank."""
    kids = {}
    for v in range(1, len(parents)):
        kids[(parents[v], ranks[v])] = v
    out: dict[int, float] = {}

    def walk(v: int, depth: int, mass: float) -> None:
        stop = mass * (1.0 - sum(p))
        for b, pb in enumerate(p, start=1):
            child = kids.get((v, b))
            if child is None:
                stop += mass * pb
            else:
                walk(child, depth + 1, mass * pb)
        out[depth + 1] = out.get(depth + 1, 0.0) + stop

    walk(0, 0, 1.0)
    return out


@settings(max_examples=200)
@given(trees(), vectors())
def test_tree_pgf_matches_enumeration(tree, p) -> None:
    parents, ranks = tree
    pgf = tree_tokens(parents, p, ranks)
    law = _enumerated(parents, ranks, p)
    for t in range(max(law) + 2):
        assert pgf.pmf(t) == pytest.approx(law.get(t, 0.0), abs=1e-12)
    f = Tree(parents, ranks).path_probabilities(p)
    assert pgf.mean() == pytest.approx(f.sum(), rel=1e-12)  # E[N] = Σ_v f(v)
    depth = np.asarray(Tree(parents, ranks).depth)
    for d in range(depth.max() + 1):  # P(N >= d + 1) = Σ_{depth(v) = d} f(v)
        assert sum(pgf.pmf(t) for t in range(d + 1, depth.max() + 2)) == pytest.approx(
            f[depth == d].sum(), abs=1e-12
        )


@pytest.mark.parametrize("alpha", [0.0, 0.37, 0.9, 1.0])
@pytest.mark.parametrize("k", [0, 1, 5])
def test_a_chain_is_theorem_4_1(alpha: float, k: int) -> None:
    assert np.allclose(tree_tokens(Tree.chain(k), [alpha]).coefficients, phi(alpha, k).coefficients)


def test_public_names() -> None:
    assert ewif.tree_tokens is tree_tokens
    assert ewif.best_tree.__module__ == "ewif.search.best_tree"


def test_default_ranks_follow_the_order_of_siblings() -> None:
    t = Tree([None, 0, 0, 1, 0])
    assert t.ranks == (0, 1, 2, 1, 3) and t.children[0] == (1, 2, 4)
    assert t.fed_per_level().tolist() == [1, 1] and t.height == 2 and not t.is_chain
    assert math.isclose(tree_tokens(t, [0.5, 0.2, 0.1]).mean(), 1 + 0.8 + 0.25)


@pytest.mark.parametrize(
    ("parents", "ranks", "match"),
    [
        ([0, 0], None, r"parents\[0\] is the root: its parent must be -1 or None, got 0"),
        ([-1, 1], None, r"parents\[1\] must be a node index in \[0, 1\).*got 1"),
        ([-1, 0, 3, 1], None, r"parents\[2\] must be a node index in \[0, 2\).*got 3"),
        ([-1, 0, -1], None, r"parents\[2\] must be a node index in \[0, 2\)"),
        ([-1, 0.5], None, r"parents\[1\] must be a node index.*got 0.5"),
        ([], None, r"at least the root"),
        ("abc", None, r"list of parent indices"),
        ([-1, 0, 0], [0, 1, 1], r"nodes 1 and 2 are siblings .* same rank 1"),
        ([-1, 0], [0, 0], r"ranks\[1\] must be an integer >= 1, got 0"),
        ([-1, 0], [0], r"one rank per node \(2\)"),
    ],
)
def test_not_a_tree_is_refused(parents, ranks, match) -> None:
    with pytest.raises(ValueError, match=match):
        Tree(parents, ranks)


@pytest.mark.parametrize(
    ("p", "match"),
    [
        ([0.5, -0.1], r"finite probabilities >= 0, got p_2 = -0.1"),
        ([float("nan")], r"got p_1 = nan"),
        ([0.7, 0.4], r"must sum to at most 1.*1.1"),
        ([], r"non-empty"),
        ([[0.5]], r"non-empty 1-D"),
        ([True], r"got p_1 = True"),
    ],
)
def test_bad_vectors_are_refused(p, match) -> None:
    with pytest.raises(ValueError, match=match):
        tree_tokens([-1, 0], p)


def test_a_rank_beyond_the_vector_is_refused() -> None:
    with pytest.raises(ValueError, match=r"node 2 has rank 2, but acceptance gives p_1..p_1"):
        tree_tokens([-1, 0, 0], [0.5])
