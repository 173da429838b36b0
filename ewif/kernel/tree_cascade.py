"""Algorithm 1 with token trees, exactly: :class:`TreeCascade`.

Two ways a cascade meets a tree (docs/theory.md, "Token trees"), combinable:

* **a tree review** (Theorems TT, TD; :mod:`ewif.kernel.tree`): reviewer ``r`` reviews a
  tree drafted by a leaf ``j`` instead of a chain. ``r = 0``: the target reviews a drafter's
  tree (Sequoia's setting, the drafter neural or Max-Gram). ``r >= 1``: a neural drafter
  reviews a tree (e.g. Max-Gram's), with lenience, and hands the accepted path and its own
  token up as one review call's tokens — a vertical cascade with a tree at the bottom. The
  tree is then the whole of ``r``'s draft: ``r``'s K row has one non-zero entry, ``K[r][j] =
  n − 1`` (the tree's draft tokens).
* **siblings on the target's draft** (Theorem TB; :mod:`ewif.kernel.siblings`): the target
  verifies ``s_j`` runner-up candidates at each position of drafter ``j``'s block.

Everything else is the kernel's: a tree review is one review call, so nested blocks of them
are stopped sums (renewal) and priced by Wald's identity, Theorem CU's catch-up chain takes the
tree review's :class:`~ewif.kernel.catch_up.Feed`, and Theorem FL the resulting step law.
:class:`TreeCascade` is a :class:`~ewif.kernel.cascade.Cascade` whose memoised calls and feeds
of the tree's reviewer are those of the tree: every method (``ewif``, ``ewif(N)``,
``tokens_pgf``, ``pass_sizes``, ``model_step_costs``, …) is exact for it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from ewif.base import validate
from ewif.base.tree_checks import candidate_presence, rank_acceptance
from ewif.kernel.budgets import drafters_reached
from ewif.kernel.cascade import Cascade
from ewif.kernel.catch_up import feed
from ewif.kernel.siblings import sibling_call
from ewif.kernel.tree import Tree, tree_call, tree_feed

__all__ = ["TreeCascade", "TreeReview"]


@dataclasses.dataclass(frozen=True)
class TreeReview:
    """Reviewer ``reviewer`` reviews ``tree``, drafted by the leaf ``drafter`` (model indices)."""

    reviewer: int
    drafter: int
    tree: Tree


class TreeCascade(Cascade):
    """A :class:`~ewif.kernel.cascade.Cascade` with a tree review and/or siblings (module
    docstring). Arguments as :class:`Cascade`, and:

    rank : mapping ``(r, j) -> (p_1, …, p_R)``, the rank-acceptance vectors of the pairs the
        tree and the siblings use (``p_1`` must equal ``alpha[r][j]``; a pair not given has
        ``p = (alpha[r][j],)``: a chain).
    tree : a :class:`TreeReview` (or ``(reviewer, drafter, Tree)``), or None.
    siblings : one count per model (entry 0 unused, 0): ``siblings[j]`` siblings at each
        position of drafter ``j``'s block in the target's draft (ranks ``2..s_j + 1``).
    proposers : one flag per model: the tree's drafter looks its candidates up (Max-Gram:
        ``n − 1`` lookups at ``c(1)``) instead of growing the tree one pass per level.
    presence : mapping ``j -> (q_1, …, q_R)`` for proposers: ``q_b`` = P(the proposer finds at
        least ``b`` candidates), so the reviewer's pass feeds only the tree nodes or siblings
        that exist (Theorem TP; a proposer not given finds them all).
    """

    def __init__(
        self,
        alpha: object,
        cost: object,
        K: object,
        *,
        rank: Mapping[tuple[int, int], object] | None = None,
        tree: TreeReview | tuple[int, int, Tree] | None = None,
        siblings: Sequence[int] | None = None,
        proposers: Sequence[bool] | None = None,
        presence: Mapping[int, object] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(alpha, cost, K, **kwargs)
        n = self.n
        self.proposers = validate.flags(
            "proposers", [False] * (n + 1) if proposers is None else proposers, n + 1
        )
        self.rank = _rank_vectors(rank or {}, self.alpha, n)
        self.tree = None if tree is None else _tree_review(tree, self)
        self.siblings = _siblings(siblings, self)
        self.presence = _presence(presence or {}, self)
        if self.tree is not None:
            self._inject_tree(self.tree)
        if any(self.siblings):
            self._inject_siblings()

    def vector(self, r: int, j: int) -> np.ndarray:
        """``p^(rj)``: the rank-acceptance vector of reviewer ``r`` and drafter ``j``."""
        return self.rank.get((r, j), np.array([self.alpha[r, j]]))

    @property
    def is_tree(self) -> bool:
        """True when some node has two children (a branching tree, or siblings)."""
        return any(self.siblings) or (self.tree is not None and not self.tree.tree.is_chain)

    def _inject_tree(self, review: TreeReview) -> None:
        """The tree reviewer's memoised call (costed and zero-cost) and its drafter's feed."""
        r, j, tree = review.reviewer, review.drafter, review.tree
        p = self.vector(r, j)
        key = (r, self._rows[r:])
        proposer, presence = bool(self.proposers[j]), self.presence.get(j)
        call = tree_call(tree, p, r, j, self.n + 1, self.pass_cost, proposer, presence)
        self._memo[key] = call
        self._feed_calls[key] = dataclasses.replace(call, cost=np.zeros_like(call.cost))
        self._feeds[(j, *key)] = tree_feed(tree, p)

    def _inject_siblings(self) -> None:
        """The target's call with siblings and the target-level feeds of catch-up drafters."""
        sigma = tuple(
            float(math.fsum(self.vector(0, j)[1 : 1 + s])) if j else 0.0
            for j, s in enumerate(self.siblings)
        )
        call = sibling_call(
            self._rows,
            self.alpha,
            sigma,
            self.siblings,
            self.pass_cost,
            self.fill,
            self._memo,
            self.presence,
        )
        self._memo[(0, self._rows)] = call
        for i in drafters_reached(0, self._rows):
            if self.catch_up[i]:
                self._feeds[(i, 0, self._rows)] = feed(
                    i, 0, self._rows, self.alpha, self.fill, self._feed_calls, self._feeds, sigma
                )

    def _rebuilt(
        self,
        alpha: object,
        catch_up: object,
        row_cost: object | None = None,
        row_step: object | None = None,
    ) -> Cascade:
        if not np.array_equal(np.asarray(alpha, dtype=float), self.alpha, equal_nan=True):
            raise ValueError(
                "a tree cascade's rank vectors fix its acceptance (p_1 = alpha[r][j]): build a "
                "new TreeCascade with new rank vectors instead of with_alpha"
            )
        return TreeCascade(
            self.alpha,
            self.cost,
            self.K,
            rank=self.rank,
            tree=self.tree,
            siblings=self.siblings,
            proposers=self.proposers,
            presence=self.presence,
            **self._kept(catch_up, row_cost, row_step),
        )

    def __repr__(self) -> str:
        parts = [f"K={self.K.tolist()}"]
        if self.tree is not None:
            t = self.tree
            parts.append(f"tree=({t.reviewer} reviews {t.drafter}: {t.tree!r})")
        if any(self.siblings):
            parts.append(f"siblings={list(self.siblings)}")
        if self.presence:
            parts.append(f"presence={ {j: q.tolist() for j, q in self.presence.items()} }")
        return f"TreeCascade({', '.join(parts)}, ewif={self.ewif():.6g})"


def _rank_vectors(
    rank: Mapping[tuple[int, int], object], alpha: np.ndarray, n: int
) -> dict[tuple[int, int], np.ndarray]:
    """The given vectors, checked: a pair ``0 <= r < j <= n``, ``p_1 = alpha[r][j]``."""
    if not isinstance(rank, Mapping):
        raise ValueError(f"rank must be a mapping (r, j) -> (p_1, ..., p_R), got {rank!r}")
    out = {}
    for key, vector in rank.items():
        r, j = (validate.count("rank key", x) for x in key)
        if not r < j <= n:
            raise ValueError(f"rank key {key!r} must be a pair (r, j) with 0 <= r < j <= {n}")
        p = rank_acceptance(f"rank[{r}, {j}]", vector)
        a = float(alpha[r, j])
        if not math.isclose(p[0], a, rel_tol=1e-9, abs_tol=1e-12):
            raise ValueError(
                f"rank[{r}, {j}] must start with p_1 = alpha[{r}][{j}] = {a!r} (the top "
                f"candidate is the chain's draft token), got p_1 = {p[0]!r}"
            )
        out[r, j] = p
    return out


def _tree_review(tree: object, c: TreeCascade) -> TreeReview:
    """The tree review, checked against K: reviewer ``r``'s only block is the leaf ``j``'s,
    with ``n − 1`` tokens; ranks within the pair's vector; no cache for a proposer."""
    review = tree if isinstance(tree, TreeReview) else TreeReview(*tree)
    r, j, t = review.reviewer, review.drafter, review.tree
    if not isinstance(t, Tree):
        raise ValueError(f"tree must hold a Tree, got {t!r}")
    if not (0 <= r < j <= c.n):
        raise ValueError(f"tree reviewer {r} and drafter {j} must satisfy 0 <= r < j <= {c.n}")
    row = c.K[r] if r < c.n else np.zeros(0)
    if not (row[j - 1] and np.count_nonzero(row) == 1):
        raise ValueError(
            f"K row {r + 1} must give the tree's drafter {j} its only block (the tree is the "
            f"whole of model {r}'s draft), got {row.tolist()}"
        )
    if row[j - 1] != t.size - 1:
        raise ValueError(
            f"K[{r}][{j - 1}] must be the tree's draft tokens, {t.size - 1}, got {row[j - 1]}"
        )
    if j < c.n and c.K[j].any():
        raise ValueError(f"the tree's drafter {j} must be a leaf (K row {j + 1} all zero)")
    if r not in ({0} | drafters_reached(0, c._rows)):
        raise ValueError(f"the tree's reviewer {r} is never called")
    t.path_probabilities(c.vector(r, j))  # ranks within the vector
    if c.proposers[j] and c.catch_up[j]:
        raise ValueError(f"model {j} is a proposer (no KV cache): catch_up must be False for it")
    return review


def _siblings(siblings: Sequence[int] | None, c: TreeCascade) -> tuple[int, ...]:
    """Sibling counts, checked: only for drafters of the target's row, within their vectors,
    never with a tree reviewed by the target."""
    if siblings is None:
        return (0,) * (c.n + 1)
    s = validate.counts("siblings", siblings)
    if s.shape != (c.n + 1,) or s[0]:
        raise ValueError(
            f"siblings must hold one count per model ({c.n + 1}), 0 for the target, got "
            f"{validate.shown(siblings)}"
        )
    for j in np.flatnonzero(s):
        if not c.K[0, j - 1]:
            raise ValueError(f"siblings[{j}] = {s[j]} but drafter {j} has no block in K row 1")
        if s[j] + 1 > (size := c.vector(0, j).size):
            raise ValueError(
                f"siblings[{j}] = {s[j]} needs ranks up to {s[j] + 1}, but rank[0, {j}] "
                f"gives p_1..p_{size} only"
            )
    if s.any() and c.tree is not None and c.tree.reviewer == 0:
        raise ValueError("siblings apply to a chain draft; the target already reviews a tree")
    return tuple(int(x) for x in s)


def _presence(presence: Mapping[int, object], c: TreeCascade) -> dict[int, np.ndarray]:
    """Candidate presence, checked: proposers only (a neural drafter always has its ranked
    candidates), ``q_1 > 0``, and long enough for the ranks the tree or the siblings use."""
    if not isinstance(presence, Mapping):
        raise ValueError(f"presence must be a mapping j -> (q_1, ..., q_R), got {presence!r}")
    out = {}
    for key, vector in presence.items():
        j = validate.count("presence key", key)
        if not 1 <= j <= c.n or not c.proposers[j]:
            raise ValueError(
                f"presence[{j}]: only a proposer's candidates can be missing, and model {j} is "
                f"{'not a proposer' if 1 <= j <= c.n else f'not a drafter (1..{c.n})'}"
            )
        q = candidate_presence(f"presence[{j}]", vector)
        if q[0] <= 0.0:
            raise ValueError(f"presence[{j}] must have q_1 > 0 (the proposer drafts), got {q[0]}")
        needed = c.siblings[j] + 1
        if c.tree is not None and c.tree.drafter == j:
            needed = max(needed, c.tree.tree.max_rank)
        if q.size < needed:
            raise ValueError(
                f"presence[{j}] gives q_1..q_{q.size}, but the configuration uses ranks up "
                f"to {needed}"
            )
        out[j] = q
    return out
