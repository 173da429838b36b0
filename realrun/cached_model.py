"""The KV-cached ``TokenModel`` of every backend: logits over the longest cached prefix.

:class:`CachedTokenModel` serves :meth:`~simulate.decoder.interface.TokenModel.logits` the
same way on transformers (:mod:`realrun.hf_model`) and llama.cpp
(:mod:`realrun.llamacpp_model`): check the request, keep the cache of the longest common
prefix with the previous call (:func:`simulate.decoder.interface.common_prefix`, at most
``len(tokens) − n`` so the last ``n`` positions are computed), feed the rest in one timed
pass, and count it (:class:`realrun.counters.PassCounters`). A backend gives the pass
(``_forward``), the rollback of its cache (``_rollback``) and how to drop it
(``_drop_cache``); it may refuse more requests (``_check_request``).

Token trees. :meth:`CachedTokenModel.tree_logits` verifies a tree in one pass
(:class:`simulate.decoder.tree_interface.TreeModel`; the plan of :mod:`realrun.tree_pass`: the
backend's ``_forward_tree``). The cache then holds every node; the next call keeps the
accepted path only — the longest path of the tree its tokens follow (``_keep_path``, the
backend's compaction) — so the path is never fed again. A pass over the same sequence whose
tree only adds nodes to the cached one (a drafter growing a tree level by level) feeds the
new nodes only; and a pass over exactly the cached tokens reuses the row after them, so a
drafter's level pass feeds just that level's nodes (Theorem TD's ``m``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from ewif.base import validate
from realrun.counters import PassCounters, TimingHook
from realrun.prefix_store import MIN_TOKENS
from realrun.tree_pass import PendingTree, TreePass, accepted_path, check_tree, extends
from simulate.decoder.interface import common_prefix


class CachedTokenModel(PassCounters):
    """A ``TokenModel`` over one KV cache (batch size 1); see the module docstring."""

    name: str
    vocab_size: int

    def __init__(self, timing_hook: TimingHook | None = None) -> None:
        PassCounters.__init__(self, timing_hook)
        self._cached: list[int] = []
        self._last_row: np.ndarray | None = None  # the scores after all of _cached, if known
        self._tree: PendingTree | None = None

    def logits(self, tokens: Sequence[int], n: int) -> np.ndarray:
        """Float32 array ``(n, vocab_size)``: scores after each of the last ``n`` prefixes."""
        ids = self._checked_ids(tokens)
        n = validate.count("n", n, minimum=1)
        if n > len(ids):
            raise ValueError(f"n must be in [1, len(tokens)={len(ids)}], got {n}")
        self._check_request(ids, n)
        self.settle(ids)
        keep = self._rollback(ids, len(ids) - n)
        start = time.perf_counter()
        scores = self._forward(ids[keep:], keep, n)
        seconds = time.perf_counter() - start
        self._cached = ids
        self._last_row = scores[-1]
        self._record(len(ids) - keep, n, seconds, keep)
        if len(ids) - keep - n >= MIN_TOKENS:  # a prefill: positions fed for the cache alone
            self._prefilled()
        return scores

    def tree_logits(
        self, tokens: Sequence[int], tree_tokens: Sequence[int], parents: Sequence[int]
    ) -> np.ndarray:
        """Float32 array ``(1 + nodes, vocab_size)``: the scores after ``tokens`` (row 0) and
        after each node's path (row ``v + 1``), in one pass (module docstring)."""
        ids = self._checked_ids(tokens)
        if not ids:
            raise ValueError("tokens must hold at least one id (the tree's root)")
        nodes, par = check_tree(tree_tokens, parents, self.vocab_size, self.name)
        if not nodes:
            return self.logits(ids, 1)
        self._check_request(ids + nodes, 1 + len(nodes))
        if extends(self._tree, ids, nodes, par):
            head = self._tree.rows
            plan = TreePass([], len(ids), nodes, par, len(self._tree.tokens))
        else:
            self.settle(ids)
            same = common_prefix(self._cached, ids) == len(ids) == len(self._cached)
            reuse = same and self._last_row is not None
            keep = self._rollback(ids, len(ids) if reuse else len(ids) - 1)
            reuse = reuse and keep == len(ids)
            head = self._last_row[None] if reuse else None
            plan = TreePass(ids[keep:], keep, nodes, par)
        if plan.fed:
            start = time.perf_counter()
            out = self._forward_tree(plan)
            seconds = time.perf_counter() - start
            self._record(len(plan.fed), plan.rows, seconds, plan.start + plan.old)
            rows = out if head is None else np.concatenate([head, out])
        else:
            rows = head
        self._cached = ids
        self._last_row = None
        self._tree = PendingTree(ids, nodes, par, rows)
        return rows

    def settle(self, tokens: Sequence[int]) -> None:
        """Keep, of a tree in the cache, the path that ``tokens`` follows (module docstring);
        nothing to do after a plain pass. Every call does this first."""
        tree = self._tree
        if tree is None:
            return
        self._tree = None
        path = accepted_path(tree, [int(t) for t in tokens])
        if self._keep_path(tree, path):
            self._cached = tree.base + [tree.tokens[v] for v in path]
            self._last_row = tree.rows[path[-1] + 1] if path else tree.rows[0]
        else:
            self.reset()

    def _checked_ids(self, tokens: Sequence[int]) -> list[int]:
        ids = [int(t) for t in tokens]
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(
                f"tokens must be ids in [0, {self.vocab_size - 1}] for model {self.name!r}, "
                f"got {bad[0]}"
            )
        return ids

    @property
    def cached_length(self) -> int:
        """Number of positions whose keys/values are in the cache."""
        return len(self._cached)

    def reset(self) -> None:
        """Drop the KV cache (the next call starts from scratch)."""
        self._drop_cache()
        self._cached = []
        self._last_row = None
        self._tree = None

    def _check_request(self, ids: list[int], n: int) -> None:
        """Refuse a request the backend cannot serve (``ValueError``); any by default."""

    def _rollback(self, ids: list[int], limit: int) -> int:
        """Keep the cache of the longest common prefix of the cached ids and ``ids`` (at most
        ``limit``); return its length."""
        raise NotImplementedError

    def _forward(self, fed: list[int], start: int, n: int) -> np.ndarray:
        """One pass over ``fed`` at positions ``start..`` on the cache; float32 logits of
        the last ``n`` positions."""
        raise NotImplementedError

    def _drop_cache(self) -> None:
        """Empty the backend's cache."""
        raise NotImplementedError

    def keep_context(self) -> None:
        """Keep the cache as it stands for reuse, as after a prefill (:meth:`_prefilled`; the
        store refuses a context shorter than :data:`realrun.prefix_store.MIN_TOKENS`), when it
        holds a plain context: the end of a generation whose text the timing rounds come back
        to (:func:`realrun.acceptance.measure_acceptance`)."""
        if self._tree is None:
            self._prefilled()

    def _prefilled(self) -> None:
        """After a pass that fed at least :data:`realrun.prefix_store.MIN_TOKENS` positions
        more than the rows it returned (a prefill; a timed pass returns all its rows): keep the
        cache for reuse if the backend can (transformers: :mod:`realrun.prefix_store`);
        nothing by default."""

    def _forward_tree(self, plan: TreePass) -> np.ndarray:
        """One pass feeding ``plan`` (:mod:`realrun.tree_pass`) on the cache; float32 logits
        of its last ``plan.rows`` fed positions."""
        raise NotImplementedError(f"{type(self).__name__} cannot verify a tree in one pass")

    def _keep_path(self, tree: PendingTree, path: list[int]) -> bool:
        """Compact the cache holding ``tree.base`` and every node of ``tree`` to the base and
        the nodes ``path``; False when the backend cannot (the cache is then dropped)."""
        raise NotImplementedError
