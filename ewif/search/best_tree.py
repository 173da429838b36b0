"""The tree with the most expected tokens per step (Theorem TO): Sequoia's dynamic programme.

Given a rank-acceptance vector ``p`` (:mod:`ewif.kernel.tree`), :func:`best_tree` returns the
tree of at most ``nodes`` nodes (the root included) and depth at most ``depth`` below the root
that maximises ``E[N] = Σ_v f(v)`` (Theorem TT); :func:`best_trees` gives every size and
depth up to those bounds from one run (what the optimizer prices).

**Theorem TO (Sequoia, arXiv 2402.12374, §3.1; with any rank order).** A tree's value is
``1 + Σ_children p_rank(c)·value(subtree(c))``, each subtree's value computed with its root
counted 1, so the best tree of ``≤ m`` nodes and depth ``≤ d`` puts a best subtree of its size
and depth ``≤ d − 1`` under each rank it uses. With ``p`` sorted decreasingly (``π`` the order;
a rank's label is kept), ``V_0(m) = 1`` and, for ``d >= 1``,

    V_d(m) = 1 + G_(d,1)(m − 1),
    G_(d,b)(s) = max_{0 <= k <= s} [p_(π b)·V_(d−1)(k) + G_(d,b+1)(s − k)],

``G_(d,R+1) = 0`` and ``V_d(0) = 0``: a (max, +) knapsack over the ranks, ``k`` the nodes under
rank ``b`` (0: no child of that rank). Every tree with ranked children is one allocation (its
children's ranks are distinct, each subtree within the same bounds), and ``p >= 0`` makes an
optimal subtree optimal in place, so ``V_d(m)`` is the exact optimum — certified against brute
force over every tree of at most 8 nodes (``tests/ewif/test_best_tree.py``). Work: ``O(d·R·m²)``
vectorised (64 nodes, depth 10, ``R = 8``: ``benchmarks/bench_trees.py``). Ties are broken
toward fewer nodes under the higher-ranked children (the first maximising ``k``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ewif.base import limits, validate
from ewif.base.tree_checks import node_count, rank_acceptance
from ewif.kernel.tree import Tree

#: Largest tree ``best_tree`` builds (the programme is quadratic in it).
MAX_NODES = 4096

__all__ = ["MAX_NODES", "BestTree", "TreeTable", "best_tree", "best_trees"]


class BestTree(NamedTuple):
    """The best tree and its expected tokens per step ``E[N] = Σ_v f(v)``."""

    tree: Tree
    value: float

    @property
    def parents(self) -> tuple[int, ...]:
        """The tree's parent list (``parents[0] = -1``: the root)."""
        return self.tree.parents

    @property
    def ranks(self) -> tuple[int, ...]:
        """Each node's rank among its siblings (0 for the root)."""
        return self.tree.ranks


class TreeTable:
    """Theorem TO's programme for every size ``m <= nodes`` and depth ``d <= depth``:
    ``values[m, d] = V_d(m)``, :meth:`tree` the tree that attains it."""

    def __init__(self, acceptance: object, nodes: int, depth: int) -> None:
        p = rank_acceptance("acceptance", acceptance)
        self.nodes = limits.at_most(
            "nodes", node_count("nodes", nodes), MAX_NODES, "nodes (the programme is quadratic)"
        )
        self.max_depth = validate.count("depth", depth)
        self.acceptance = p
        self._order = np.argsort(-p, kind="stable")
        ps = p[self._order]
        n = self.nodes
        values = np.zeros((n + 1, self.max_depth + 1))
        values[1:, 0] = 1.0
        self._choice = np.zeros((self.max_depth + 1, ps.size, n + 1), dtype=np.int64)
        s = np.arange(n + 1)
        gap = s[:, None] - s[None, :]  # gap[s, k] = s − k: the nodes left for later ranks
        valid = gap >= 0
        for d in range(1, self.max_depth + 1):
            g = np.zeros(n + 1)
            for b in reversed(range(ps.size)):
                cand = np.where(valid, ps[b] * values[None, :, d - 1] + g[np.maximum(gap, 0)], -1.0)
                self._choice[d, b] = np.argmax(cand, axis=1)
                g = cand[s, self._choice[d, b]]
            values[1:, d] = 1.0 + g[:-1]
        values.setflags(write=False)
        self.values = values

    def value(self, nodes: int, depth: int) -> float:
        """``V_depth(nodes)``: the most expected tokens of a tree within the bounds."""
        m, d = self._bounds(nodes, depth)
        return float(self.values[m, d])

    def tree(self, nodes: int, depth: int) -> Tree:
        """A tree attaining :meth:`value` (nodes in breadth-first order, children by rank)."""
        m, d = self._bounds(nodes, depth)
        parents, ranks = [-1], [0]
        queue = [(0, m, d)]  # (node, its subtree's node budget, its depth budget)
        while queue:
            v, budget, left = queue.pop(0)
            if left == 0:
                continue
            rest = budget - 1
            for b in range(self._choice.shape[1]):
                k = int(self._choice[left, b, rest])
                if k:
                    parents.append(v)
                    ranks.append(int(self._order[b]) + 1)
                    queue.append((len(parents) - 1, k, left - 1))
                    rest -= k
        return Tree(parents, ranks)

    def _bounds(self, nodes: int, depth: int) -> tuple[int, int]:
        m = node_count("nodes", nodes)
        d = validate.count("depth", depth)
        if m > self.nodes or d > self.max_depth:
            raise ValueError(
                f"this table holds nodes <= {self.nodes} and depth <= {self.max_depth}, "
                f"got nodes = {m}, depth = {d}"
            )
        return m, d


def best_trees(acceptance: object, nodes: int, depth: int) -> TreeTable:
    """Theorem TO for every size up to ``nodes`` and depth up to ``depth`` (one run)."""
    return TreeTable(acceptance, nodes, depth)


def best_tree(acceptance: object, nodes: int, depth: int) -> BestTree:
    """The tree of at most ``nodes`` nodes (root included) and depth at most ``depth`` below
    the root with the most expected tokens per step under the rank-acceptance vector
    ``acceptance`` (Theorem TO; exact), and that value. ``nodes >= 1``, ``depth >= 0``
    (``ValueError`` otherwise, naming the value)."""
    table = TreeTable(acceptance, nodes, depth)
    return BestTree(table.tree(table.nodes, table.max_depth), table.value(nodes, depth))
