"""Theorem TP: a proposer that finds fewer candidates than a tree or its siblings ask for.

The law of the present nodes against brute-force enumeration of every node's candidate count,
its mean against ``Σ_v Π q`` along the path, the sibling compound against its mean, full
presence giving the full-size pricing exactly, the model-set section's round trip (older
sections still read) and the one-line errors on bad vectors."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files.model_set import ModelSet
from ewif.files.rank_acceptance import RankAcceptance
from ewif.kernel.tree import Tree
from ewif.kernel.tree_cascade import TreeCascade

TARGET = [1.0, 1.1, 1.2, 1.4, 1.5, 1.7, 1.8, 2.0, 2.2]


@st.composite
def small_trees(draw, max_nodes: int = 6, ranks: int = 3) -> Tree:
    n = draw(st.integers(1, max_nodes))
    parents, rank, used = [-1], [0], {}
    for v in range(1, n):
        p = draw(st.integers(0, v - 1))
        free = [b for b in range(1, ranks + 1) if b not in used.get(p, set())]
        if not free:
            break
        b = draw(st.sampled_from(free))
        used.setdefault(p, set()).add(b)
        parents.append(p)
        rank.append(b)
    return Tree(parents, rank)


@st.composite
def presences(draw, size: int = 3) -> list[float]:
    q = [draw(st.floats(0.05, 1.0))]
    for _ in range(size - 1):
        q.append(q[-1] * draw(st.floats(0.0, 1.0)))
    return q


def _enumerated(tree: Tree, q: list[float]) -> np.ndarray:
    """The law of the present nodes by enumerating every node's candidate count."""
    law_k = -np.diff([1.0, *q, 0.0])  # P(K = k), k = 0..R
    out = np.zeros(tree.size + 1)
    for counts in itertools.product(range(len(q) + 1), repeat=tree.size):
        weight = float(np.prod([law_k[k] for k in counts]))
        there = [True] + [False] * (tree.size - 1)
        for v in range(1, tree.size):
            parent = tree.parents[v]
            there[v] = there[parent] and tree.ranks[v] <= counts[parent]
        out[sum(there)] += weight
    return out


@settings(max_examples=40, deadline=None)
@given(small_trees(), presences())
def test_the_present_nodes_law_is_the_enumerated_one(tree: Tree, q: list[float]) -> None:
    law = tree.size_law(q)
    expected = _enumerated(tree, q)
    assert law.sum() == pytest.approx(1.0)
    assert np.allclose(np.pad(law, (0, expected.size - law.size)), expected, atol=1e-12)


@settings(max_examples=40)
@given(small_trees(max_nodes=12), presences())
def test_the_mean_present_nodes_sum_the_path_products(tree: Tree, q: list[float]) -> None:
    mean = float(np.arange(tree.size_law(q).size) @ tree.size_law(q))
    paths = np.ones(tree.size)  # Π q_rank along the path to each node
    for v in range(1, tree.size):
        paths[v] = paths[tree.parents[v]] * q[tree.ranks[v] - 1]
    assert mean == pytest.approx(float(paths.sum()))


def _sibling_cascade(presence: dict | None, s: int = 2) -> TreeCascade:
    return TreeCascade(
        [[0, 0.6, 0.4], [0, 0, 0.5], [0, 0, 0]], None, [[1, 2], [0, 2]],
        cost_curve=[TARGET, [0.2, 0.3, 0.35], [0.01]], catch_up=[True, True, False],
        rank={(0, 2): [0.4, 0.2, 0.1]}, siblings=[0, 0, s], proposers=[False, False, True],
        presence=presence,
    )  # fmt: skip


def test_full_presence_is_the_full_size_pricing() -> None:
    tree = Tree([-1, 0, 0, 1, 1, 2])
    kwargs = dict(
        cost_curve=[TARGET, [0.01]], rank={(0, 1): [0.5, 0.2, 0.1]}, tree=(0, 1, tree),
        proposers=[False, True],
    )  # fmt: skip
    full = TreeCascade([[0, 0.5], [0, 0]], None, [[5]], **kwargs)
    ones = TreeCascade([[0, 0.5], [0, 0]], None, [[5]], presence={1: [1.0, 1.0]}, **kwargs)
    fewer = TreeCascade([[0, 0.5], [0, 0]], None, [[5]], presence={1: [1.0, 0.3]}, **kwargs)
    assert ones.ewif() == full.ewif()
    assert fewer.expected_tokens() == full.expected_tokens()  # p already counts what is missing
    assert fewer.expected_cost() < full.expected_cost()
    assert _sibling_cascade({2: [1.0, 1.0, 1.0]}).ewif() == _sibling_cascade(None).ewif()


def test_the_target_feeds_the_siblings_found() -> None:
    """The target's pass holds ``L_2·(s − E[S])`` fewer positions on average, ``E[S] =
    Σ_(i <= s) q_(i+1)/q_1``, where the proposer's block ``L_2 = 2`` (a leaf's budget) carries
    ``s = 2`` siblings per token; the tail the target catches up on is the same."""
    q = [0.8, 0.4, 0.1]
    with_q, without = _sibling_cascade({2: q}), _sibling_cascade(None)

    def mean(c: TreeCascade) -> float:
        counts = c.pass_sizes()[0].counts
        return float(np.arange(counts.size) @ counts)

    assert with_q.pass_sizes()[0].counts.sum() == pytest.approx(1.0)
    assert mean(without) - mean(with_q) == pytest.approx(2 * (2 - (0.4 + 0.1) / 0.8))
    assert with_q.expected_tokens() == without.expected_tokens()


@pytest.mark.parametrize(
    ("presence", "match"),
    [
        ({1: [1.0, 0.5]}, "only a proposer's candidates"),
        ({2: [0.5, 0.6, 0.1]}, r"non-increasing.*q_1 = 0.5 < q_2 = 0.6"),
        ({2: [1.0, 0.5]}, "uses ranks up to 3"),
        ({2: [0.0, 0.0, 0.0]}, "q_1 > 0"),
        ({2: [1.2, 0.5, 0.1]}, "probabilities <= 1"),
        ({2: [1.0, float("nan"), 0.1]}, "finite probabilities"),
        ({5: [1.0, 0.5, 0.1]}, r"not a drafter \(1..2\)"),
    ],
)
def test_bad_presence_is_one_clear_error(presence: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _sibling_cascade(presence)


def _model_set(section: dict) -> dict:
    return {
        "schema": "csd.models/6",
        "models": ["t", "mag"],
        "cost": [1.0, 0.0],
        "alpha": {"1": [[None, 0.5], [None, None]]},
        "rank_acceptance": section,
    }


def test_presence_round_trips_through_the_model_set_file() -> None:
    section = {"vectors": {"1,0,1": [0.5, 0.2]}, "presence": {"1": [1.0, 0.43]}}
    ms = ModelSet.from_dict(json.loads(json.dumps(_model_set(section))))
    assert ms.rank_acceptance.presence[1].tolist() == [1.0, 0.43]
    again = ModelSet.from_dict(json.loads(json.dumps(ms.to_dict())))
    assert again.rank_acceptance.presence[1].tolist() == [1.0, 0.43]
    old = ModelSet.from_dict(_model_set({"vectors": {"1,0,1": [0.5, 0.2]}}))
    assert old.rank_acceptance.presence == {}
    assert "presence" not in old.to_dict()["rank_acceptance"]


@pytest.mark.parametrize(
    ("presence", "match"),
    [
        ({"x": [1.0]}, r"presence key 'x' must be 'j'"),
        ({"3": [1.0]}, r"presence\['3'\] must name a drafter 1..1"),
        ({"1": [0.2, 0.5]}, "non-increasing"),
    ],
)
def test_bad_presence_in_a_file_is_one_clear_error(presence: dict, match: str) -> None:
    section = {"vectors": {"1,0,1": [0.5, 0.2]}, "presence": presence}
    with pytest.raises(ValueError, match=match):
        ModelSet.from_dict(_model_set(section))


def test_rank_acceptance_keeps_presence_apart_from_vectors() -> None:
    section = RankAcceptance({(1.0, 0, 1): [0.5, 0.2]}, presence={1: [1.0, 0.4]})
    assert section.to_dict()["presence"] == {"1": [1.0, 0.4]}
