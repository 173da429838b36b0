"""Token trees at token level: Algorithm 1 with a tree review and/or siblings on the target's
draft (the configurations of :class:`ewif.kernel.tree_cascade.TreeCascade`), lossless.

:class:`TreeDecoder` is :class:`~simulate.decoder.cascade.CascadeDecoder` with two more ways
to review:

* **a tree review** ``(r, j, parents, ranks)``: leaf ``j`` drafts the tree of that shape — a
  neural ``j`` level by level (its first pass feeds what it has not fed, then one pass per
  level over the nodes that have children, each node's children its ranked candidates,
  :mod:`simulate.decoder.tree_draft`); a proposer by ``candidates`` after each node's path
  (:class:`~simulate.decoder.tree_interface.RankedProposer`) — and ``r`` verifies it in one
  pass (:func:`~simulate.decoder.tree_interface.tree_logits`), greedily or by recursive
  rejection sampling (:mod:`simulate.decoder.tree_verify`, Theorem TL), with lenience when
  ``r >= 1``. Its output hands the exact law of each token upward (``stage_law``), so a
  target reviewing it stays lossless.
* **siblings** ``siblings[j]`` at each position of drafter ``j``'s block in the target's
  draft: the runner-up candidates of the model that drafted that position (a leaf's own
  distribution; a nested block's reviewer's row at that position; Max-Gram's other matches),
  the main draft token first, verified by the target as a tree.

Greedy decoding with lenience 1 at the target reproduces the target's greedy output token for
token; sampling reproduces its distribution (tested by χ², ``tests/simulate/test_tree_decoder.py``).
Pass sizes follow the cache contract: a tree pass of the reviewer feeds its unfed tail and
every node; afterwards it has fed the accepted path, a neural tree drafter the accepted nodes
it fed (those with children).
"""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter

import numpy as np

from ewif.base.tree_checks import tree_parents, tree_ranks
from simulate.decoder.cascade import CascadeDecoder, _Recorder
from simulate.decoder.interface import Proposer, TokenModel, common_prefix
from simulate.decoder.sampling import Decoding, sample
from simulate.decoder.tree_draft import SIBLING_RULES, TOP_K_LAWS, Draft, ranked_candidates
from simulate.decoder.tree_interface import RankedProposer, tree_logits
from simulate.decoder.tree_verify import greedy_tree_verify, sampling_tree_verify
from simulate.decoder.verify import TokenLaw

__all__ = ["TreeDecoder"]

Output = tuple[list[int], list[TokenLaw] | None, list[str | None]]


class TreeDecoder(CascadeDecoder):
    """Algorithm 1 over ``models`` with budgets ``K`` and a tree review ``tree = (reviewer,
    drafter, parents, ranks)`` (``ranks`` None: by order of appearance; ``K[reviewer]`` gives
    the drafter its only block, ``len(parents) − 1`` tokens) and/or ``siblings`` (one count
    per model, 0 for the target). ``sibling_rule``: ``"top-k"`` (deterministic candidates) or
    ``"sample"`` (drawn without replacement; sampling only). ``top_k_law="softmax"`` checks a
    top-k candidate with the drafter's softmax instead of its point mass: the known wrong
    rule, **lossy**, for tests only. Other arguments as :class:`CascadeDecoder`."""

    def __init__(
        self,
        models: Sequence[TokenModel | Proposer],
        K: object,
        *,
        tree: tuple[int, int, Sequence[int], Sequence[int] | None] | None = None,
        siblings: Sequence[int] | None = None,
        sibling_rule: str = "top-k",
        top_k_law: str = "one-hot",
        lenience: float = 1.0,
        decoding: Decoding | None = None,
        seed: int | None = 0,
        lenient_target: bool = False,
    ) -> None:
        super().__init__(models, K, lenience, decoding, seed, lenient_target)
        n = len(self._models) - 1
        if sibling_rule not in SIBLING_RULES:
            raise ValueError(f"sibling_rule must be one of {SIBLING_RULES}, got {sibling_rule!r}")
        if sibling_rule == "sample" and self.decoding.greedy:
            raise ValueError("sibling_rule='sample' needs sampling (temperature > 0)")
        if top_k_law not in TOP_K_LAWS:
            raise ValueError(f"top_k_law must be one of {TOP_K_LAWS}, got {top_k_law!r}")
        self.sibling_rule, self.top_k_law = sibling_rule, top_k_law
        self._tree = None if tree is None else self._checked_tree(tree)
        self._siblings = self._checked_siblings(siblings, n)
        self._last_logits: list[np.ndarray | None] = [None] * (n + 1)

    # ------------------------------------------------------------------ checks
    def _checked_tree(self, tree: tuple) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
        r, j, parents, ranks = tree
        n = len(self._models) - 1
        if not (isinstance(r, int) and isinstance(j, int) and 0 <= r < j <= n):
            raise ValueError(f"tree reviewer and drafter must satisfy 0 <= r < j <= {n}")
        par = tree_parents("tree parents", parents)
        rk = tree_ranks("tree ranks", par, ranks)
        row = self._K[r] if r < len(self._K) else []
        if [b for b in row if b] != [len(par) - 1] or row[j - 1] != len(par) - 1:
            raise ValueError(
                f"K row {r + 1} must give drafter {j} its only block, {len(par) - 1} tokens "
                f"(the tree's draft tokens), got {row}"
            )
        if not self._leaf[j]:
            raise ValueError(f"the tree's drafter {j} must be a leaf (K row {j + 1} all zero)")
        if not self._neural[j] and max(rk) > 1 and not isinstance(self._models[j], RankedProposer):
            raise TypeError(f"models[{j}] must rank its candidates (a RankedProposer) for a tree")
        return r, j, par, rk

    def _checked_siblings(self, siblings: Sequence[int] | None, n: int) -> list[int]:
        s = [0] * (n + 1) if siblings is None else [int(x) for x in siblings]
        if len(s) != n + 1 or s[0] or min(s) < 0:
            raise ValueError(f"siblings must hold one count >= 0 per model, 0 for the target: {s}")
        for j in range(1, n + 1):
            if s[j] and not (self._K and self._K[0][j - 1]):
                raise ValueError(f"siblings[{j}] = {s[j]} but drafter {j} has no block in K row 1")
            if s[j] and not self._neural[j] and not isinstance(self._models[j], RankedProposer):
                raise TypeError(f"models[{j}] must rank its candidates (a RankedProposer)")
        if any(s) and self._tree is not None and self._tree[0] == 0:
            raise ValueError("siblings apply to a chain draft; the target already reviews a tree")
        return s

    # ------------------------------------------------------------------ dispatch
    def _forward(self, i: int, tokens: list[int], n: int, rec: _Recorder) -> np.ndarray:
        out = super()._forward(i, tokens, n, rec)
        self._last_logits[i] = out  # a nested block's siblings come from its reviewer's rows
        return out

    def _review_call(self, r: int, seq: list[int], prompt_length: int, rec: _Recorder) -> Output:
        if self._tree is not None and r == self._tree[0]:
            return self._tree_review(seq, prompt_length, rec)
        if r == 0 and any(self._siblings):
            return self._sibling_review(seq, prompt_length, rec)
        return super()._review_call(r, seq, prompt_length, rec)

    # ------------------------------------------------------------------ passes
    def _record(self, i: int, m: int, rec: _Recorder, seconds: float) -> None:
        rec.passes[i] += 1
        rec.fed[i] += m
        rec.sizes[i][m] += 1
        rec.call_seconds[i] += seconds

    def _tree_pass(self, i: int, seq: list[int], draft: Draft, rec: _Recorder) -> np.ndarray:
        """Model ``i``'s one pass over its unfed tail of ``seq`` and every node: its rows."""
        keep = common_prefix(seq, self._seen[i], len(seq) - 1)
        start = perf_counter()
        out = tree_logits(self._models[i], seq, draft.tokens[1:], draft.relative_parents())
        self._record(i, len(seq) - keep + draft.size - 1, rec, perf_counter() - start)
        self._seen[i] = seq
        return out

    def _verify(self, r: int, draft: Draft, rows: np.ndarray):
        lenience = self.lenience if r > 0 or self.lenient_target else 1.0
        start = perf_counter()
        if self.decoding.greedy:
            review = greedy_tree_verify(draft.tokens, draft.children, rows, lenience)
        else:
            probs = self.decoding.probs(rows)
            review = sampling_tree_verify(
                draft.tokens, draft.children, draft.laws, probs, lenience, self._rng, r > 0
            )
        return review, perf_counter() - start

    def _finish(self, r: int, seq: list[int], draft: Draft, review, producers, rec) -> Output:
        """Statistics, the reviewer's fed tokens, and the call's output."""
        path = review.path
        examined = len(path) + (1 if draft.children[path[-1] if path else 0] else 0)
        rec.review(r, producers[:examined], len(path))
        sources = [draft.sources[v] for v in path]
        if r == 0:
            rec.target(len(path), examined, sources)
        self._seen[r] = seq + [draft.tokens[v] for v in path]
        return review.tokens, review.laws, [*sources, None]

    # ------------------------------------------------------------------ a tree review
    def _tree_review(self, seq: list[int], prompt_length: int, rec: _Recorder) -> Output:
        r, j, parents, ranks = self._tree
        kids: list[list[tuple[int, int]]] = [[] for _ in parents]  # (rank, shape node)
        for u in range(1, len(parents)):
            kids[parents[u]].append((ranks[u], u))
        draft = Draft([seq[-1]])
        at = {0: 0}  # shape node -> draft node (nodes a proposer could not fill are left out)
        level = [0]
        first = True
        while level:
            grown = [u for u in level if kids[u] and u in at]
            if not grown:
                break
            rows = self._drafter_rows(j, seq, draft, [at[u] for u in grown], first, rec)
            first = False
            nxt = []
            for u, row in zip(grown, rows, strict=True):
                wanted = sorted(kids[u])
                count = wanted[-1][0]
                cands = self._candidates(j, seq, prompt_length, draft, at[u], row, count, rec)
                for rank, child in wanted:
                    if rank <= len(cands):
                        token, law, source = cands[rank - 1]
                        at[child] = draft.add(at[u], token, law, source)
                        nxt.append(child)
            level = nxt
        rows = self._tree_pass(r, seq, draft, rec)
        review, seconds = self._verify(r, draft, rows)
        rec.decode_seconds += seconds
        self._last_logits[r] = rows[[0, *review.path]]  # the rows of its output positions
        if self._neural[j]:
            fed = [v for v in review.path if draft.children[v]]
            self._seen[j] = seq + [draft.tokens[v] for v in fed]
        return self._finish(r, seq, draft, review, [j] * draft.size, rec)

    def _drafter_rows(self, j, seq, draft, nodes, first, rec) -> list[np.ndarray | None]:
        """The drafter's rows at ``nodes``: the root's from its first pass (what it has not
        fed), deeper ones from one pass over those nodes (a tree pass); none for a proposer.
        The pass is asked for the nodes that have children and ``nodes`` only (a leaf is
        never fed): a model that keeps the previous level's nodes in its cache feeds just
        ``nodes`` (:class:`~simulate.decoder.tree_interface.TreeModel`)."""
        if not self._neural[j]:
            return [None] * len(nodes)
        if first:
            return [self._forward(j, seq, 1, rec)[0]]
        fed = sorted({v for v in range(1, draft.size) if draft.children[v]} | set(nodes))
        index = {v: i for i, v in enumerate(fed)}
        parents = [index[draft.parents[v]] if draft.parents[v] > 0 else -1 for v in fed]
        start = perf_counter()
        rows = tree_logits(self._models[j], seq, [draft.tokens[v] for v in fed], parents)
        self._record(j, len(nodes), rec, perf_counter() - start)
        return [rows[index[v] + 1] for v in nodes]

    def _candidates(self, j, seq, prompt_length, draft, v, row, count, rec, exclude=()):
        """Up to ``count`` ranked ``(token, law, source)`` after node ``v``: from the
        drafter's ``row`` (neural; module :mod:`simulate.decoder.tree_draft`) or its
        ``candidates`` lookup (a proposer; one call, recorded when ``rec`` is given)."""
        if row is None:
            model = self._models[j]
            context = seq + [draft.tokens[u] for u in draft.path(v)]
            start = perf_counter()
            found = [int(t) for t in model.candidates(context, prompt_length, count + len(exclude))]
            found = [t for t in found if t not in exclude][:count]
            if rec is not None:
                self._record(j, len(found), rec, perf_counter() - start)
            return [(t, None, model.name) for t in found]
        probs = None if self.decoding.greedy else self.decoding.probs(row)
        picked = ranked_candidates(
            row, probs, count, self.sibling_rule, self.top_k_law, self._rng, tuple(exclude)
        )
        return [(t, law, None) for t, law in picked]

    # ------------------------------------------------------------------ siblings at the target
    def _sibling_review(self, seq: list[int], prompt_length: int, rec: _Recorder) -> Output:
        draft = Draft([seq[-1]])
        spine = [0]  # draft node at each depth of the main path
        producers: list[int] = []
        for j, k in enumerate(self._K[0], start=1):
            if k == 0:
                continue
            made = 0
            while made < k:
                block = self._block(
                    j, seq + [draft.tokens[v] for v in spine[1:]], prompt_length, k - made, rec
                )
                for token, law, source, row in block:
                    parent = spine[-1]
                    spine.append(draft.add(parent, token, law, source))
                    sib = self._siblings_of(j, seq, prompt_length, draft, parent, token, law, row)
                    for s_token, s_law, s_source in sib:
                        draft.add(parent, s_token, s_law, s_source)
                    producers.append(j)
                made += len(block)
        rows = self._tree_pass(0, seq, draft, rec)
        review, seconds = self._verify(0, draft, rows)
        rec.decode_seconds += seconds
        return self._finish(0, seq, draft, review, producers, rec)

    def _block(self, j, context, prompt_length, want, rec):
        """The next tokens of drafter ``j``'s block: ``(token, law, source, row)`` each, ``row``
        the drafter's scores there (None for a proposer's). A leaf writes ``want`` tokens, a
        nested drafter one review call's (its reviewer's rows at its output positions)."""
        if not self._leaf[j]:
            tokens, laws, sources = self._review_call(j, context, prompt_length, rec)
            rows = self._last_logits[j]
            laws = laws if laws is not None else [None] * len(tokens)
            return list(zip(tokens, laws, sources, rows[: len(tokens)], strict=True))
        if not self._neural[j]:
            draft, laws, sources = [], [], []
            self._leaf_block(j, context, prompt_length, want, draft, laws, sources, rec)
            return [(t, None, s, None) for t, s in zip(draft, sources, strict=True)]
        out = []
        for _ in range(want):
            row = self._forward(j, context, 1, rec)[0]
            start = perf_counter()
            if self.decoding.greedy:
                token, law = int(np.argmax(row)), None
            else:
                law = self.decoding.probs(row)
                token = sample(law, self._rng)
            rec.decode_seconds += perf_counter() - start
            out.append((token, law, None, row))
            context = [*context, token]
        return out

    def _siblings_of(self, j, seq, prompt_length, draft, parent, token, law, row):
        """The ``siblings[j]`` runner-up candidates of the main token ``token`` (law ``law``)
        after node ``parent``: a proposer's other matches; otherwise the drafter's ranked
        candidates at that position (``"top-k"``), or draws without replacement from the main
        token's own law (``"sample"``), the main token excluded."""
        count = self._siblings[j]
        if not count:
            return []
        if row is None:
            return self._candidates(
                j, seq, prompt_length, draft, parent, None, count, None, (token,)
            )
        probs = None
        if not self.decoding.greedy:
            own = self.sibling_rule == "sample" and law is not None
            probs = law if own else self.decoding.probs(row)
        picked = ranked_candidates(
            row, probs, count, self.sibling_rule, self.top_k_law, self._rng, (token,)
        )
        return [(t, q, None) for t, q in picked]
