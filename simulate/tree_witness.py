"""Witness of the tree theory: Algorithm 1 with token trees played on explicit token lists.

Independent of :mod:`ewif.kernel.tree`, :mod:`ewif.kernel.siblings` and
:mod:`ewif.kernel.tree_cascade` (it shares no evaluation code with them; only the checks of
:mod:`ewif.base.tree_checks`): it extends :class:`simulate.fed_positions.FedPositions`, where
every token is a fresh id and every model with ``catch_up`` keeps the list of tokens it fed.

* **A tree review** by reviewer ``r`` of leaf ``j``'s tree: every node gets a fresh id. A
  proposer ``j`` makes ``n − 1`` lookups (``m = 1`` each). A neural ``j`` makes one pass per
  level: the first feeds what it has not fed of the sequence (its cache's common prefix with
  it, as any pass), level ``l >= 2`` the ``F_(l−1)`` nodes of depth ``l − 1`` that have
  children; afterwards it keeps the sequence and the accepted nodes it fed. ``r`` feeds its
  unfed tail and the ``n − 1`` draft nodes, ``n`` rows. Then ``r`` walks from the root: at a
  node its token is the candidate of rank ``b`` with probability ``p_b`` (one uniform draw per
  node against the cumulative vector), and the walk moves to the child of that rank if there
  is one; the review yields the path and a fresh token.
* **Siblings on the target's draft**: the spine is Algorithm 1's draft (as in
  :class:`FedPositions`); the target's pass also feeds ``s_j`` sibling positions per token of
  block ``j``. At each position one draw decides: main token (``p_1``), a sibling
  (``p_2 + … + p_(s_j+1)``: the step yields the accepted spine, a fresh sibling and a fresh
  bonus), or a stop (a fresh correction).

* **Candidates a proposer does not find** (``presence[j]``, Theorem TP): at every node of its
  tree that is there (the root always), one uniform draw ``u`` gives its candidate count
  ``K = #{b : u < q_b}`` and the children of rank ``<= K`` are there; at every position of its
  block in the target's draft, ``S = #{i <= s_j : u < q_(i+1) / q_1}`` siblings are. The
  reviewer's pass feeds the nodes that are there. The walk draws its ranks as above, apart
  from these draws (the pass's size and what it accepts independent, as the theory takes them).

The caches then follow from the token lists alone (a sibling or a correction is a new id,
so no model's fed prefix matches beyond it).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from ewif.base.tree_checks import (
    candidate_presence,
    rank_acceptance,
    tree_parents,
    tree_ranks,
)
from simulate.fed_positions import FedPositions, Price

__all__ = ["TreeSteps"]


class TreeSteps(FedPositions):
    """Plays the cascades of :class:`FedPositions` (``alpha``, ``K``, ``fill``, ``catch_up``,
    ``price``) with token trees: ``rank[(r, j)]`` the rank-acceptance vectors (``p_1`` should
    equal ``alpha[r][j]``; a pair not given draws with ``(alpha[r][j],)``), ``tree = (r, j,
    parents, ranks)`` a tree review (``ranks`` None: by order of appearance), ``siblings[j]``
    the siblings per token of block ``j`` at the target, ``proposers[j]`` a drafter that looks
    its tree up, ``presence[j]`` a proposer's candidate presence ``(q_1, …)``."""

    def __init__(
        self,
        alpha: object,
        K: object,
        fill: str,
        catch_up: Sequence[bool],
        price: Price,
        *,
        rank: Mapping[tuple[int, int], Sequence[float]] | None = None,
        tree: tuple[int, int, Sequence[int], Sequence[int] | None] | None = None,
        siblings: Sequence[int] | None = None,
        proposers: Sequence[bool] | None = None,
        presence: Mapping[int, Sequence[float]] | None = None,
        seed: int = 0,
    ) -> None:
        rng = random.Random(seed)
        self._uniform = rng.random
        super().__init__(alpha, K, fill, catch_up, price, draw=lambda p: rng.random() < p)
        self.rank = {
            (int(r), int(j)): rank_acceptance(f"rank[{r}, {j}]", v).tolist()
            for (r, j), v in (rank or {}).items()
        }
        self.siblings = [0] * (self.n + 1) if siblings is None else [int(s) for s in siblings]
        self.proposers = [False] * (self.n + 1) if proposers is None else list(proposers)
        self.presence = {
            int(j): candidate_presence(f"presence[{j}]", q).tolist()
            for j, q in (presence or {}).items()
        }
        self.tree = None
        if tree is not None:
            r, j, parents, ranks = tree
            par = tree_parents("parents", parents)
            self.tree = (int(r), int(j), par, tree_ranks("ranks", par, ranks))

    def _vector(self, r: int, j: int) -> list[float]:
        return self.rank.get((r, j), [self.alpha[r][j]])

    def _rank_drawn(self, r: int, j: int, ranks: int) -> int:
        """One draw at a position: the rank ``b <= ranks`` of the candidate the reviewer's
        token equals, or 0 for none of them."""
        u, total = self._uniform(), 0.0
        for b, p in enumerate(self._vector(r, j)[:ranks], start=1):
            total += p
            if u < total:
                return b
        return 0

    def _found(self, thresholds: Sequence[float]) -> int:
        """How many of ``thresholds`` (non-increasing) one uniform draw falls below: the
        candidates a proposer finds."""
        u = self._uniform()
        return sum(u < x for x in thresholds)

    def _record(self, i: int, m: int, rows: int) -> None:
        self.step_sizes[i][m] = self.step_sizes[i].get(m, 0) + 1
        self.step_caught[i] += m - rows
        self.step_cost += self.price(i, m, rows)

    def _review(self, r: int, context: list[int]) -> tuple[list[int], list[int]]:
        if self.tree is not None and r == self.tree[0]:
            return self._tree_review(context)
        if r == 0 and any(self.siblings):
            return self._sibling_review(context)
        return super()._review(r, context)

    # ------------------------------------------------------------------ a tree review
    def _tree_review(self, context: list[int]) -> tuple[list[int], list[int]]:
        r, j, parents, ranks = self.tree
        n = len(parents)
        kids: list[dict[int, int]] = [{} for _ in range(n)]
        depth = [0] * n
        for v in range(1, n):
            kids[parents[v]][ranks[v]] = v
            depth[v] = depth[parents[v]] + 1
        node = [context[-1]] + [self._token() for _ in range(n - 1)]
        if self.proposers[j]:
            for _ in range(n - 1):
                self._pass(j, context, 1)
        else:
            self._pass(j, context, 1)
            fed = [0] * (max(depth) + 1)
            for v in range(n):
                fed[depth[v]] += bool(kids[v])
            for m in fed[1:]:
                if m:
                    self._record(j, m, m)
        there = [True] * n
        if j in self.presence:
            there = [True] + [False] * (n - 1)
            for v in range(n):  # a node comes after its parent, whose draw came first
                if there[v] and kids[v]:
                    found = self._found(self.presence[j])
                    for b, c in kids[v].items():
                        there[c] = b <= found
        present = [node[v] for v in range(1, n) if there[v]]
        self._reviewer_pass(r, context, present, len(present) + 1)
        path, v = [], 0
        while (b := self._rank_drawn(r, j, len(self._vector(r, j)))) and b in kids[v]:
            v = kids[v][b]
            path.append(v)
        tokens = [node[v] for v in path]
        if self.catch_up[j] and not self.proposers[j]:
            keep = path if path and kids[path[-1]] else path[:-1]
            self.seen[j] = context + [node[v] for v in keep]
        if self.catch_up[r]:
            self.seen[r] = context + tokens
        return [*tokens, self._token()], [j] * len(tokens) + [r]

    def _reviewer_pass(self, r: int, context: list[int], nodes: list[int], rows: int) -> None:
        """``r``'s one pass over its unfed tail and the draft nodes (``rows`` logit rows)."""
        m = rows
        if self.catch_up[r]:
            seen, cap = self.seen[r], len(context) - 1
            keep = 0
            while keep < min(cap, len(seen)) and seen[keep] == context[keep]:
                keep += 1
            m = len(context) - keep + len(nodes)
        self._record(r, m, rows)

    # ------------------------------------------------------------------ siblings at the target
    def _sibling_review(self, context: list[int]) -> tuple[list[int], list[int]]:
        draft, producers = self._spine(context)
        extra = sum(self._sibling_count(j) for j in producers)
        self._record(0, len(draft) + 1 + extra, len(draft) + 1 + extra)
        for i, j in enumerate(producers):
            b = self._rank_drawn(0, j, 1 + self.siblings[j])
            if b == 1:
                continue
            if b > 1:
                return [*draft[:i], self._token(), self._token()], [j] * (i + 1) + [0]
            return [*draft[:i], self._token()], [j] * i + [0]
        return [*draft, self._token()], [*producers, 0]

    def _sibling_count(self, j: int) -> int:
        """The siblings there at a position of drafter ``j``'s block: ``s_j``, or for a
        proposer with a presence vector ``#{i <= s_j : u < q_(i+1) / q_1}``."""
        s = self.siblings[j]
        q = self.presence.get(j)
        if q is None or s == 0:
            return s
        return self._found([x / q[0] for x in q[1 : s + 1]])

    def _spine(self, context: list[int]) -> tuple[list[int], list[int]]:
        """Algorithm 1's draft of the target (:meth:`FedPositions._draft` of row 0) and the
        drafter of each position."""
        draft, producers, _ = self._draft(0, context)
        return draft, producers
