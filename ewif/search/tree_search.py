"""The exact search for the best token-tree configuration of a model set, with its chains.

The space (:class:`TreeBounds` sizes it), every lenience of the set:

1. **A tree reviewed by the target** (Theorems TT, TD): for each drafter ``j``, the most-tokens
   tree of each size ``2..nodes`` and depth ``1..depth`` (Theorem TO,
   :mod:`ewif.search.best_tree`) under ``p^(0j)``. The drafter's passes depend on the tree's
   shape, so for a neural drafter this is the Sequoia family of shapes (each priced exactly);
   for a proposer, whose cost is its ``n − 1`` lookups, the family is exact over every tree.
2. **Cascades with trees** (Theorems TB, TT, TD): every upper-triangular ``K`` over the set's
   models with budgets ``0..k_max``, where each reviewer ``r >= 1`` may instead review a tree
   of a leaf drafter ``j`` (the family of 1. under ``p^(rj)`` at the lenience), and each
   drafter of the target's row may add ``0..siblings`` siblings per token (within its vector).

Models without measured vectors have ``p = (α)``, so every tree is a chain and the search is
the chain optimizer's (configurations that are chains are part of the space: the result says
when a chain, or autoregressive decoding, beats every tree). The target level is priced for
every target row of an assignment of the rows below at once (:mod:`ewif.search.tree_space`),
exactly without catch-up and as an upper bound with it (:func:`bounding_set`); configurations
are then evaluated exactly (:func:`ewif.files.tree_models.tree_cascade`), best first, until no
bound can enter the top rows or beat the best tree or the best chain found.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ewif.base import validate
from ewif.files.model_set import ModelSet
from ewif.files.tree_config import TreeConfig, TreeSpec
from ewif.files.tree_models import candidate_presence, is_proposer, rank_vector, tree_cascade
from ewif.kernel.budgets import drafters_reached, is_leaf, rows_of
from ewif.kernel.review_call import review_call
from ewif.kernel.tree import Tree, tree_call
from ewif.kernel.tree_cascade import TreeCascade
from ewif.search.best_tree import best_trees
from ewif.search.catch_up_search import bounding_set, resolved_catch_up
from ewif.search.tree_space import block_options, empty_block, target_values

__all__ = ["RankedTree", "TreeBounds", "TreeSearchResult", "optimize_trees"]

_FIRST_ROUND = 32


@dataclass(frozen=True)
class TreeBounds:
    """The search's bounds: budgets ``0..k_max``, trees of ``2..nodes`` nodes (root
    included) and depth ``1..depth``, ``0..siblings`` siblings per token."""

    k_max: int = 8
    nodes: int = 32
    depth: int = 8
    siblings: int = 7

    def __post_init__(self) -> None:
        validate.count("k_max", self.k_max, minimum=1)
        validate.count("nodes", self.nodes, minimum=1)
        validate.count("depth", self.depth)
        validate.count("siblings", self.siblings)


@dataclass(frozen=True)
class RankedTree:
    """One configuration of the search and its exact EWIF."""

    config: TreeConfig
    ewif: float

    def describe(self) -> str:
        return f"{self.config.describe()}  EWIF {self.ewif:.4f}"


@dataclass
class TreeSearchResult:
    """The best configuration, the best branching one (``best_tree``, None if the space has
    none) and the best chain (``best_chain``), the ranked ``table`` and what was searched."""

    best: RankedTree
    best_tree: RankedTree | None
    best_chain: RankedTree | None
    table: list[RankedTree]
    n_configurations: int
    seconds: float
    model_set: ModelSet = field(repr=False)
    bounds: TreeBounds
    fill: str = "tokens"
    catch_up: tuple[bool, ...] | None = None

    @property
    def decision(self) -> str:
        """``"tree"``, ``"chain"`` or ``"autoregressive"``: what beats everything else."""
        if self.best.ewif <= 1.0:
            return "autoregressive"
        return "tree" if self.best.config.is_tree else "chain"

    def cascade(self, ranked: RankedTree | None = None) -> TreeCascade:
        """The exact :class:`TreeCascade` of ``ranked`` (default: the best)."""
        config = (ranked or self.best).config
        return tree_cascade(self.model_set, config, self.fill, _flags(self, config))


def optimize_trees(
    model_set: ModelSet,
    *,
    bounds: TreeBounds | None = None,
    leniences: Iterable[float] | None = None,
    fill: str = "tokens",
    top: int = 10,
    catch_up: object | None = None,
) -> TreeSearchResult:
    """The exact optimum of the tree space of ``model_set`` (module docstring), with the best
    tree and the best chain; ``catch_up`` one flag per model (default: the set's own)."""
    started = time.perf_counter()
    bounds = TreeBounds() if bounds is None else bounds
    top = validate.count("top", top, minimum=1)
    search = _Search(model_set, bounds, leniences, fill, resolved_catch_up(model_set, catch_up))
    rows = max(_FIRST_ROUND, top)
    exact: dict[tuple, RankedTree] = {}
    for config in search.target_trees():
        exact.setdefault(_key(config), search.exact(config))
    while True:
        pending, left = search.candidates(rows)
        for _value, config in pending:
            if _key(config) not in exact:
                exact[_key(config)] = search.exact(config)
        ranked = sorted(exact.values(), key=_order)
        if _settled(ranked, left, top):
            break
        rows *= 4
    return TreeSearchResult(
        best=ranked[0],
        best_tree=next((r for r in ranked if r.config.is_tree), None),
        best_chain=next((r for r in ranked if not r.config.is_tree), None),
        table=ranked[:top],
        n_configurations=search.size,
        seconds=time.perf_counter() - started,
        model_set=model_set,
        bounds=bounds,
        fill=fill,
        catch_up=search.flags,
    )


def _settled(ranked: list[RankedTree], left: dict[bool, float], top: int) -> bool:
    """No candidate left out can enter the ``top`` rows or beat the best of its class
    (branching or chain): its bound is at most the smaller of those exact values."""
    if not ranked:
        return all(v == -np.inf for v in left.values())
    floor = ranked[min(top, len(ranked)) - 1].ewif if len(ranked) >= top else -np.inf
    for kind, bound in left.items():
        best = next((r.ewif for r in ranked if r.config.is_tree == kind), -np.inf)
        if bound > min(floor, best) * (1.0 + 1e-12):
            return False
    return True


def _order(r: RankedTree) -> tuple:
    c = r.config
    size = int(c.K.sum()) + sum(c.siblings.values())
    return (-r.ewif, size, c.K.tolist(), c.lenience, c.models)


def _key(c: TreeConfig) -> tuple:
    review = None if c.review is None else (c.review.reviewer, c.review.drafter, c.review.parents)
    return (
        c.models,
        c.K.tobytes(),
        c.lenience,
        review,
        c.review and c.review.ranks,
        tuple(sorted(c.siblings.items())),
    )


def _flags(result: TreeSearchResult, config: TreeConfig) -> list[bool] | None:
    if result.catch_up is None:
        return None
    return [result.catch_up[result.model_set.index(m)] for m in config.models]


class _Search:
    """The space of one search (module docstring) and its two stages."""

    def __init__(self, ms, bounds, leniences, fill, flags) -> None:
        self.ms, self.bounds, self.fill, self.flags = ms, bounds, fill, flags
        self.n = len(ms.models) - 1
        self.leniences = (
            ms.leniences if leniences is None else tuple(map(ms.checked_lenience, leniences))
        )
        self.proposers = [i > 0 and is_proposer(ms, m) for i, m in enumerate(ms.models)]
        self.presence = candidate_presence(ms, range(len(ms.models)), self.proposers)
        caught = flags is not None and any(flags[1:])
        self.bound_cost = (bounding_set(ms, flags) if caught else ms).pass_cost
        self._trees: dict[tuple, list[Tree]] = {}
        self.size = 0

    # ------------------------------------------------------------------ the trees
    def trees(self, lenience: float, r: int, j: int) -> list[Tree]:
        """The distinct most-tokens trees of every size and depth within the bounds, under
        ``p^(rj)`` (chains with all ranks 1 left out: they are the chain K's)."""
        key = (lenience if r else self.leniences[0], r, j)
        if key not in self._trees:
            out: list[Tree] = []
            p = rank_vector(self.ms, key[0], r, j)
            if not np.isnan(p[0]) and p.size > 1 and self.bounds.depth >= 1:
                table = best_trees(p, self.bounds.nodes, self.bounds.depth)
                seen = set()
                for m, d in itertools.product(
                    range(2, table.nodes + 1), range(1, table.max_depth + 1)
                ):
                    tree = table.tree(m, d)
                    if tree not in seen and not _plain_chain(tree):
                        seen.add(tree)
                        out.append(tree)
            self._trees[key] = out
        return self._trees[key]

    def target_trees(self) -> list[TreeConfig]:
        """Stage 1: the trees the target reviews (module docstring, 1.)."""
        out = []
        target = self.ms.models[0]
        for j, name in enumerate(self.ms.models[1:], start=1):
            for tree in self.trees(self.leniences[0], 0, j):
                review = TreeSpec(target, name, tree.parents, tree.ranks)
                out.append(TreeConfig((target, name), [[tree.size - 1]], 1.0, review))
        self.targets = len(out)
        return out

    def exact(self, config: TreeConfig) -> RankedTree:
        flags = None
        if self.flags is not None:
            flags = [self.flags[self.ms.index(m)] for m in config.models]
        return RankedTree(config, tree_cascade(self.ms, config, self.fill, flags).ewif())

    # ------------------------------------------------------------------ cascades with trees
    def candidates(self, rows: int) -> tuple[list[tuple[float, TreeConfig]], dict[bool, float]]:
        """Stage 2: the ``rows`` best values (bounds under catch-up) of each class (branching
        or chain) over every target row, assignment of the rows below and lenience; and, per
        class, the best value left out (``-inf`` when none is)."""
        pools: dict[bool, list] = {True: [], False: []}
        left = {True: -np.inf, False: -np.inf}
        self.size = self.targets
        for lenience in self.leniences:
            for nested in self._assignments(lenience):
                values, blocks, branching = self._values(lenience, nested)
                self.size += int(np.isfinite(values).sum())
                sibs = sum(_axis(blk.siblings > 0, d, values.ndim) for d, blk in enumerate(blocks))
                tree = np.broadcast_to(branching | (sibs > 0), values.shape)
                for kind in (True, False):
                    v = np.where(tree == kind, values, -np.inf).reshape(-1)
                    kept, rest = _best(v, rows)
                    left[kind] = max(left[kind], rest)
                    pools[kind] += [(float(v[i]), lenience, nested, blocks, i) for i in kept]
        out = []
        for kind, pool in pools.items():
            pool.sort(key=lambda x: -x[0])
            if len(pool) > rows:
                left[kind] = max(left[kind], pool[rows][0])
            out += [(x[0], self._config(*x[1:])) for x in pool[:rows]]
        return out, left

    def _assignments(self, lenience: float) -> Iterable[tuple]:
        """Every assignment of the rows of models ``1..n−1``: a chain row (budgets
        ``0..k_max`` for the drafters below) or a tree of a leaf drafter below."""
        options = []
        for r in range(1, self.n):
            rows: list = list(itertools.product(range(self.bounds.k_max + 1), repeat=self.n - r))
            for j in range(r + 1, self.n + 1):
                rows += [("tree", j, t) for t in range(len(self.trees(lenience, r, j)))]
            options.append(rows)
        for nested in itertools.product(*options):
            if all(_leaf_ok(nested, r) for r in range(1, self.n)):
                yield nested

    def _rows_below(self, lenience: float, nested: tuple) -> tuple[np.ndarray, dict]:
        """``K`` with the target's row empty and the assignment below (a tree as its
        ``n − 1`` tokens), and the kernel memo with the trees' calls in it."""
        K = np.zeros((self.n, self.n), dtype=np.int64)
        memo: dict = {}
        trees = {}
        for r, row in enumerate(nested, start=1):
            if row and row[0] == "tree":
                tree = self.trees(lenience, r, row[1])[row[2]]
                K[r, row[1] - 1] = tree.size - 1
                trees[r] = (row[1], tree)
            else:
                K[r, r:] = row
        alpha = self.ms.alpha[lenience]
        for r, (j, tree) in trees.items():
            p = rank_vector(self.ms, lenience, r, j)
            call = tree_call(
                tree, p, r, j, self.n + 1, self.bound_cost, self.proposers[j], self.presence.get(j)
            )
            memo[(r, rows_of(K, r))] = call
        return K, memo, alpha, trees

    def _values(self, lenience: float, nested: tuple):
        """The values of every target row over the assignment ``nested`` (``-inf`` for
        configurations counted elsewhere), its blocks, and whether a branching tree is in it."""
        K, memo, alpha, trees = self._rows_below(lenience, nested)
        blocks = []
        for j in range(1, self.n + 1):
            a = float(alpha[0, j])
            if np.isnan(a):
                blocks.append(empty_block())
                continue
            call = (
                None
                if is_leaf(K, j)
                else review_call(j, rows_of(K, j), alpha, self.bound_cost, self.fill, memo)
            )
            leaf = float(self.bound_cost.at(j, 1))
            vector = rank_vector(self.ms, lenience, 0, j)
            budgets = range(1, self.bounds.k_max + 1)
            blocks.append(
                block_options(
                    a,
                    vector,
                    budgets,
                    self.bounds.siblings,
                    call,
                    leaf,
                    self.fill,
                    self.presence.get(j),
                )
            )
        values = target_values(blocks, self.bound_cost)
        mask = self._kept(K, lenience, blocks)
        branching = any(not t.is_chain for _, t in trees.values())
        return np.where(mask, values, -np.inf), blocks, branching

    def _kept(self, K: np.ndarray, lenience: float, blocks) -> np.ndarray:
        """One configuration per equivalence class: every model with a row below the target
        is reached, and lenience is searched only where a drafter reviews."""
        n = self.n
        allowed = np.zeros(1 << n, dtype=bool)
        for bits in range(1, 1 << n):
            reached = {j for j in range(1, n + 1) if bits >> (j - 1) & 1}
            for r in range(1, n):
                if r in reached:
                    reached |= {j for j in range(r + 1, n + 1) if K[r, j - 1]}
            rows = [r for r in range(1, n) if K[r].any()]
            ok = all(r in reached for r in rows)
            allowed[bits] = ok and (bool(rows) or lenience == self.leniences[0])
        used = sum(_axis((blk.budget > 0) * (1 << d), d, n) for d, blk in enumerate(blocks))
        return allowed[used]

    def _config(self, lenience, nested, blocks, flat) -> TreeConfig:
        """The canonical :class:`TreeConfig` of a target row (flat index into the blocks'
        product) over ``nested``: unreached drafters dropped."""
        K, _, _, trees = self._rows_below(lenience, nested)
        pos = np.unravel_index(flat, tuple(blk.budget.size for blk in blocks))
        siblings = {}
        for d, (blk, o) in enumerate(zip(blocks, pos, strict=True)):
            K[0, d] = blk.budget[o]
            siblings[d + 1] = int(blk.siblings[o])
        keep = sorted({0} | drafters_reached(0, rows_of(K)))
        names = tuple(self.ms.models[i] for i in keep)
        sub = K[np.ix_(keep[:-1], [j - 1 for j in keep[1:]])]
        review = None
        for r, (j, tree) in trees.items():
            if r in keep:
                review = TreeSpec(self.ms.models[r], self.ms.models[j], tree.parents, tree.ranks)
        reviews = any(K[r].any() for r in keep[1:] if r < self.n)
        return TreeConfig(
            names,
            sub,
            lenience if reviews else self.leniences[0],
            review,
            {self.ms.models[j]: s for j, s in siblings.items() if s and j in keep},
        )


def _leaf_ok(nested: tuple, r: int) -> bool:
    """A tree row of ``r`` needs its drafter ``j`` to be a leaf (its own row all zero)."""
    row = nested[r - 1]
    if not row or row[0] != "tree":
        return True
    j = row[1]
    below = nested[j - 1] if j - 1 < len(nested) else ()
    return not below or (below[0] != "tree" and not any(below))


def _plain_chain(tree: Tree) -> bool:
    """A chain whose every node is its parent's top candidate: the chain K's block."""
    return tree.is_chain and all(b == 1 for b in tree.ranks[1:])


def _best(values: np.ndarray, rows: int) -> tuple[np.ndarray, float]:
    """Indices of the ``rows`` largest finite values (all of them if fewer), and the largest
    value left out (``-inf`` if none)."""
    finite = np.flatnonzero(np.isfinite(values))
    if finite.size <= rows:
        return finite, -np.inf
    order = np.argpartition(-values[finite], rows)
    return finite[order[:rows]], float(values[finite[order[rows]]])


def _axis(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)
