"""The tree search is exact over its space: against brute force (every configuration of a
small space evaluated with the kernel, catch-up and curves on), and on sets without rank
vectors it is the chain optimizer."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from ewif.files.model_set import ModelSet
from ewif.files.rank_acceptance import RankAcceptance
from ewif.files.tree_config import TreeConfig, TreeSpec
from ewif.files.tree_models import tree_cascade
from ewif.search.best_tree import best_trees
from ewif.search.optimizer import optimize
from ewif.search.tree_search import TreeBounds, optimize_trees

BOUNDS = TreeBounds(k_max=2, nodes=4, depth=2, siblings=2)


def _set(catch_up: bool, target: list[float]) -> ModelSet:
    alpha = {
        1.0: np.array([[np.nan, 0.7, 0.45], [np.nan, np.nan, 0.5], [np.nan] * 3]),
        3.0: np.array([[np.nan, 0.7, 0.45], [np.nan, np.nan, 0.6], [np.nan] * 3]),
    }
    vectors = {
        (1.0, 0, 1): [0.7, 0.15, 0.05],
        (1.0, 0, 2): [0.45, 0.2, 0.1],
        (1.0, 1, 2): [0.5, 0.25],
        (3.0, 1, 2): [0.6, 0.2],
    }
    return ModelSet(
        models=("t", "d", "mag"),
        cost=np.array([1.0, 0.12, 0.0]),
        cost_per_token=np.zeros(3),
        alpha=alpha,
        cost_curve=(np.array(target), np.array([0.12, 0.16, 0.23, 0.3]), np.array([0.0])),
        catch_up=(False, catch_up, False),
        rank_acceptance=RankAcceptance(vectors),
    )


def _brute(ms: ModelSet, bounds: TreeBounds) -> list[tuple[float, TreeConfig]]:
    """Every configuration of the space, each evaluated exactly (unreached drafters dropped)."""
    out = []
    trees = {}
    for lenience in ms.leniences:
        for r, j in ((0, 1), (0, 2), (1, 2)):
            p = ms.rank_acceptance.vector(lenience, r, j, float(ms.alpha[lenience][r, j]))
            table = best_trees(p, bounds.nodes, bounds.depth)
            trees[lenience, r, j] = {
                table.tree(m, d)
                for m in range(2, bounds.nodes + 1)
                for d in range(1, bounds.depth + 1)
            }
    for j, name in ((1, "d"), (2, "mag")):
        for tree in trees[1.0, 0, j]:
            review = TreeSpec("t", name, tree.parents, tree.ranks)
            out.append(TreeConfig(("t", name), [[tree.size - 1]], 1.0, review))
    budgets = range(bounds.k_max + 1)
    for lenience, k11, k12, s1, s2 in itertools.product(
        ms.leniences, budgets, budgets, range(3), range(3)
    ):
        rows = [("chain", k22) for k22 in budgets] + [("tree", t) for t in trees[lenience, 1, 2]]
        for kind, x in rows:
            sib = {"d": s1, "mag": s2}
            K = [[k11, k12], [0, x if kind == "chain" else x.size - 1]]
            review = None if kind == "chain" else TreeSpec("d", "mag", x.parents, x.ranks)
            config = _canonical(K, lenience, review, sib)
            if config is not None:
                out.append(config)
    unique = {_key(c): c for c in out}
    return [(tree_cascade(ms, c).ewif(), c) for c in unique.values()]


def _key(c: TreeConfig) -> tuple:
    """Equivalent configurations once: a tree review of a top-candidate chain is the chain's
    block, and lenience matters only where a drafter reviews."""
    review = c.review
    if review is not None and review.is_chain and set(review.ranks[1:]) == {1}:
        review = None
    nested = c.K[1:].any()
    sib = tuple(sorted((m, s) for m, s in c.siblings.items() if s))
    return (c.models, c.K.tobytes(), c.lenience if nested else None, review, sib)


def _canonical(K, lenience, review, siblings) -> TreeConfig | None:
    (k11, k12), (_, k22) = K
    if (k11 == 0 and siblings["d"]) or (k12 == 0 and siblings["mag"]) or not (k11 or k12):
        return None
    if k11 == 0:  # d is never called: only the target's Max-Gram block
        return TreeConfig(("t", "mag"), [[k12]], lenience, None, {"mag": siblings["mag"]})
    if k22 == 0 and k12 == 0:
        return TreeConfig(("t", "d"), [[k11]], lenience, None, {"d": siblings["d"]})
    return TreeConfig(("t", "d", "mag"), K, lenience, review, siblings)


@pytest.mark.parametrize("catch_up", [False, True])
def test_the_search_equals_brute_force(catch_up: bool) -> None:
    ms = _set(catch_up, [1.0, 1.0, 1.0, 1.02, 1.04, 1.06, 1.08, 1.1])
    result = optimize_trees(ms, bounds=BOUNDS, top=5)
    brute = _brute(ms, BOUNDS)
    values = sorted((v for v, _ in brute), reverse=True)
    assert [r.ewif for r in result.table] == pytest.approx(values[:5], rel=1e-12)
    trees = [v for v, c in brute if c.is_tree]
    chains = [v for v, c in brute if not c.is_tree]
    assert result.best_tree.ewif == pytest.approx(max(trees), rel=1e-12)
    assert result.best_chain.ewif == pytest.approx(max(chains), rel=1e-12)
    assert result.decision == "tree"
    assert result.cascade().ewif() == pytest.approx(result.best.ewif, rel=1e-12)


def test_steep_curves_say_chain_or_autoregressive() -> None:
    steep = _set(True, [1.0, 1.6, 2.3, 3.0, 3.7, 4.4, 5.1, 5.8])
    result = optimize_trees(steep, bounds=BOUNDS)
    assert result.decision in ("chain", "autoregressive")
    assert result.best_tree.ewif < result.best_chain.ewif
    brute = _brute(steep, BOUNDS)
    assert result.best.ewif == pytest.approx(max(v for v, _ in brute), rel=1e-12)


def test_a_set_without_vectors_gives_the_chain_optimum() -> None:
    ms = dataclasses.replace(_set(True, [1.0, 1.05, 1.1, 1.3, 1.45]), rank_acceptance=None)
    result = optimize_trees(ms, bounds=BOUNDS)
    chain = optimize(ms, bounds=(0, BOUNDS.k_max), subsets=False)
    assert result.best_tree is None and not result.best.config.is_tree
    assert result.best.ewif == pytest.approx(chain.best.ewif, rel=1e-12)
