"""Token trees: the exact law of tokens per step (Theorem TT) and of one tree review's passes
(Theorem TD), in the kernel's types.

**Trees.** A :class:`Tree` is a parent list with ranked children (:mod:`ewif.base.tree_checks`):
node 0 is the root — the last token of the sequence, which the reviewer has not fed — and
every other node is a draft token whose rank ``b`` among its siblings says which of the
drafter's ranked candidates it is. The rank-acceptance vector ``p = (p_1, …, p_R)`` of the
(reviewer, drafter) pair gives ``p_b`` = P(the reviewer's token at a position is the drafter's
``b``-th candidate there), the events exclusive (``Σ p_b <= 1``), independent across positions
(the Bernoulli model of :mod:`ewif.kernel.cascade`, with ``p = (α)`` a chain).

**Theorem TT (tokens of a tree review).** The reviewer walks from the root: at node ``v`` its
token is the candidate of rank ``b`` with probability ``p_b``; if ``v`` has a child of that rank
the walk moves there, otherwise it stops and the review yields the path's tokens and the
reviewer's own (correction or bonus). With ``f(v) = Π p_rank(u)`` over the nodes ``u`` of the
path from the root to ``v`` (``f(root) = 1``):

* P(``v`` is on the accepted path) ``= f(v)`` (the ranks along a path are one outcome per
  position, and positions are independent);
* the step yields ``N = depth(v*) + 1`` tokens, ``v*`` the deepest accepted node, so
  ``P(N >= d + 1) = Σ_{depth(v) = d} f(v)`` (at most one node per depth is accepted) and
  ``E[N] = Σ_v f(v)`` (the root counted for the reviewer's own token);
* ``P(v* = v) = f(v) − Σ_{c child of v} f(c)``.

A chain of ``k`` nodes below the root with ``p = (α)`` gives Theorem 4.1's ``φ``.

**Theorem TD (the passes of one tree review).** The reviewer verifies all ``n`` nodes in one
pass: ``m = n`` positions (the root and ``n − 1`` draft tokens), ``n`` logit rows. A neural
drafter grows the tree level by level, one pass per level ``l = 1..H`` (``H`` the tree's
height): pass ``l`` feeds the ``F_(l−1)`` nodes of depth ``l − 1`` that have children, one
logit row each (a node's children are its ranked candidates there; a leaf is never fed). A
proposer (Max-Gram) looks its candidates up: ``n − 1`` lookups at ``c(1)`` each, as a chain
block of its tokens costs (free when ``c = 0``). With a KV cache (Theorem CU) the drafter's
first pass feeds its unfed tail ``U`` instead of the root alone (one row), and after the
review it has fed the accepted path except a leaf: its tail is ``u = 2`` (the reviewer's token
and the accepted leaf) when ``v*`` is a leaf other than the root, else ``u = 1``, so
``exit[t, u] = Σ_v P(v* = v)·[t = depth(v) + 1, u = 1 + leaf(v)]``. This is Theorem CU's
:class:`~ewif.kernel.catch_up.Feed` of the review: ``first = δ_0``, ``rest`` the passes of
levels ``2..H``.

**Theorem TP (the nodes a proposer's tree really has).** A proposer may find fewer candidates
than the tree asks for (Max-Gram's distinct continuations run out): with ``q_b`` = P(at least
``b`` candidates at a node) (:func:`ewif.base.tree_checks.candidate_presence`), independent
across nodes, a node is present when its parent is and the parent's candidate count ``K``
reaches its rank; the reviewer's pass feeds the present nodes only. Their number has the PGF
``G_root(z)``, where for a node ``v`` with children ``c_1, c_2, …`` of ranks ``b_1 < b_2 < …``

    G_v(z) = z · Σ_i (q_(b_i) − q_(b_(i+1))) · Π_(k <= i) G_(c_k)(z),

with ``q_(b_0) = 1`` (the ``i = 0`` term, no child, has the empty product 1) and ``q_(b_(last+1))
= 0`` (a leaf: ``G_v = z``). The tokens are Theorem TT's with the same vector ``p``: ``p_b``
already counts a missing ``b``-th candidate as not taken, and the pass's size is independent of
what it accepts; only the reviewer's pass size becomes a law. ``q = 1`` gives ``m = n``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ewif.base.arithmetic import padded_add
from ewif.base.tree_checks import (
    candidate_presence,
    rank_acceptance,
    tree_parents,
    tree_ranks,
)
from ewif.kernel.catch_up import Feed
from ewif.kernel.pass_cost import PassCost
from ewif.kernel.review_call import Call
from ewif.theory.pgf import Pgf

__all__ = ["Tree", "tree_call", "tree_feed", "tree_tokens"]


class Tree:
    """A token tree: ``parents`` (``parents[0]`` the root, ``-1`` or None) and the ranks of
    the nodes among their siblings (default: the order they appear in; module docstring).

    Immutable; equal trees (same parents and ranks) compare and hash equal.
    """

    __slots__ = ("children", "depth", "parents", "ranks")

    def __init__(self, parents: Sequence[int | None], ranks: Sequence[int] | None = None) -> None:
        self.parents = tree_parents("parents", parents)
        self.ranks = tree_ranks("ranks", self.parents, ranks)
        kids: list[list[int]] = [[] for _ in self.parents]
        depth = [0] * len(self.parents)
        for v in range(1, len(self.parents)):
            kids[self.parents[v]].append(v)
            depth[v] = depth[self.parents[v]] + 1
        self.children = tuple(tuple(sorted(c, key=self.ranks.__getitem__)) for c in kids)
        self.depth = tuple(depth)

    @classmethod
    def chain(cls, k: int) -> Tree:
        """The chain of ``k`` draft tokens (``k + 1`` nodes)."""
        return cls([-1, *range(k)])

    @property
    def size(self) -> int:
        """Nodes, the root included (the positions of the reviewer's pass)."""
        return len(self.parents)

    @property
    def height(self) -> int:
        """The largest depth below the root (0 for the root alone)."""
        return max(self.depth)

    @property
    def max_rank(self) -> int:
        """The largest rank used (0 for the root alone)."""
        return max(self.ranks)

    @property
    def is_chain(self) -> bool:
        """True when no node has two children."""
        return all(len(c) <= 1 for c in self.children)

    def is_leaf(self, v: int) -> bool:
        """True when node ``v`` has no child."""
        return not self.children[v]

    def fed_per_level(self) -> np.ndarray:
        """``F_0..F_(H−1)``: nodes of each depth that have children — what a neural drafter
        feeds at each level (Theorem TD; ``F_0 = 1`` unless the tree is the root alone)."""
        fed = np.zeros(self.height, dtype=np.int64)
        for v, kids in enumerate(self.children):
            if kids:
                fed[self.depth[v]] += 1
        return fed

    def path_probabilities(self, acceptance: object) -> np.ndarray:
        """``f(v) = Π p_rank`` along the path to ``v`` (Theorem TT); ``acceptance`` is the
        rank-acceptance vector, long enough for every rank the tree uses."""
        p = rank_acceptance("acceptance", acceptance)
        if self.max_rank > p.size:
            v = self.ranks.index(self.max_rank)
            raise ValueError(
                f"node {v} has rank {self.max_rank}, but acceptance gives p_1..p_{p.size} only "
                f"(ranks must be at most {p.size})"
            )
        f = np.ones(self.size)
        for v in range(1, self.size):
            f[v] = f[self.parents[v]] * p[self.ranks[v] - 1]
        return f

    def deepest(self, acceptance: object) -> np.ndarray:
        """``P(v* = v) = f(v) − Σ_children f(c)``: the law of the deepest accepted node."""
        f = self.path_probabilities(acceptance)
        out = f.copy()
        for v in range(1, self.size):
            out[self.parents[v]] -= f[v]
        return np.maximum(out, 0.0)

    def size_law(self, presence: object | None = None) -> np.ndarray:
        """``pmf[m]`` = P(``m`` nodes present, the root included) when a proposer finds at
        least ``b`` candidates with probability ``presence[b − 1]`` (Theorem TP); None: every
        node, ``m = size``."""
        if presence is None:
            return _point(self.size)
        q = candidate_presence("presence", presence)
        if self.max_rank > q.size:
            raise ValueError(
                f"the tree uses rank {self.max_rank}, but presence gives q_1..q_{q.size} only "
                f"(ranks must be at most {q.size})"
            )
        law: list[np.ndarray] = [np.zeros(0)] * self.size
        for v in reversed(range(self.size)):
            kids = self.children[v]  # by rank
            weights = -np.diff([1.0, *(q[self.ranks[c] - 1] for c in kids), 0.0])
            product, total = np.ones(1), np.full(1, weights[0])  # no child there
            for c, weight in zip(kids, weights[1:], strict=True):  # the first i children
                product = np.convolve(product, law[c])
                total = padded_add(total, weight * product)
            law[v] = np.concatenate([[0.0], total])
        return law[0]

    def tokens_pmf(self, acceptance: object) -> np.ndarray:
        """``pmf[t] = P(N = t)``, ``N = depth(v*) + 1`` the tokens of one review (Theorem TT)."""
        g = self.deepest(acceptance)
        out = np.zeros(self.height + 2)
        np.add.at(out, np.asarray(self.depth) + 1, g)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tree):
            return NotImplemented
        return (self.parents, self.ranks) == (other.parents, other.ranks)

    def __hash__(self) -> int:
        return hash((self.parents, self.ranks))

    def __repr__(self) -> str:
        default = self.ranks == tree_ranks("ranks", self.parents, None)
        ranks = "" if default else f", ranks={list(self.ranks)}"
        return f"Tree({list(self.parents)}{ranks})"


def tree_tokens(
    parents: Sequence[int | None] | Tree, acceptance: object, ranks: Sequence[int] | None = None
) -> Pgf:
    """The exact PGF of the tokens one review of the tree ``parents`` yields (Theorem TT):
    ``P(N >= d + 1) = Σ_{depth(v) = d} f(v)``, ``E[N] = Σ_v f(v)``. ``acceptance`` is the
    rank-acceptance vector ``(p_1, …, p_R)``; ``ranks`` the nodes' ranks among their siblings
    (default: the order they appear in)."""
    tree = parents if isinstance(parents, Tree) and ranks is None else Tree(parents, ranks)
    return Pgf(np.clip(tree.tokens_pmf(acceptance), 0.0, 1.0))


def tree_call(
    tree: Tree,
    acceptance: np.ndarray,
    reviewer: int,
    drafter: int,
    n_models: int,
    pass_cost: PassCost,
    proposer: bool,
    presence: np.ndarray | None = None,
) -> Call:
    """One review by ``reviewer`` of ``tree``, drafted by ``drafter`` (Theorem TD), as the
    kernel's :class:`~ewif.kernel.review_call.Call` (paper accounting: the drafter's first pass
    feeds the root alone). ``proposer``: the drafter looks its candidates up (``n − 1`` passes
    at ``m = 1``) instead of growing the tree level by level; ``presence`` (a proposer's, or
    None: every candidate found) makes the reviewer's pass size Theorem TP's law.
    ``n_models`` sizes the per-model arrays; ``pass_cost`` needs ``expected(i, m_pmf)`` only
    (the catch-up feeds price at zero)."""
    n = tree.size
    reviewed = tree.size_law(presence)
    sizes = [np.zeros(1) for _ in range(n_models)]
    sizes[reviewer] = reviewed
    if proposer:
        sizes[drafter] = _point(1, weight=float(n - 1))
    else:
        sizes[drafter] = _counts(tree.fed_per_level())
    passes = np.array([s.sum() for s in sizes])
    cost = np.array([pass_cost.expected(i, s) if s.sum() else 0.0 for i, s in enumerate(sizes)])
    f = tree.path_probabilities(acceptance)
    ends = np.zeros(tree.height + 1)  # P(the accepted path ends at a leaf of depth d)
    for v in range(1, n):
        if tree.is_leaf(v):
            ends[tree.depth[v]] += f[v]
    pmf = tree.tokens_pmf(acceptance)
    return Call(pmf, cost, passes, ends, reviewed[1:], tuple(sizes))


def tree_feed(tree: Tree, acceptance: np.ndarray) -> Feed:
    """Theorem TD's :class:`~ewif.kernel.catch_up.Feed` of a neural drafter with a KV cache
    over one review of ``tree``: its first pass feeds the tail it enters with (``first =
    δ_0``), then levels ``2..H``; it leaves with ``u = 2`` when the deepest accepted node is a
    leaf other than the root, else ``u = 1``."""
    g = tree.deepest(acceptance)
    exit_law = np.zeros((tree.height + 2, 3))
    for v in range(tree.size):
        leaf = v > 0 and tree.is_leaf(v)
        exit_law[tree.depth[v] + 1, 2 if leaf else 1] += g[v]
    return Feed(np.ones(1), _counts(tree.fed_per_level()[1:]), exit_law)


def _point(m: int, weight: float = 1.0) -> np.ndarray:
    out = np.zeros(m + 1)
    out[m] = weight
    return out


def _counts(sizes: np.ndarray) -> np.ndarray:
    """``out[m]`` = how many of ``sizes`` equal ``m``."""
    if sizes.size == 0:
        return np.zeros(1)
    return np.bincount(sizes, minlength=1).astype(float)
