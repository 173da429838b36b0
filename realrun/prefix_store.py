"""Prefilled prompts kept for reuse: a bounded store of KV-cache snapshots by the tokens they hold.

A measurement feeds the same prompts again and again — every timing round starts on one of the
measuring prompts (:mod:`realrun.timing`), every method of a run decodes each held-out prompt
in turn (:mod:`realrun.side_by_side`) — and each time a model's cache is elsewhere, so the
prompt is prefilled anew. Prefill is outside every clock, but not outside the wall time: on a
2-core CPU it was ~40 % of a timing round of the Qwen 1.5B > 0.5B family in float16 (6 s of
14–15 s; grid to m = 8). A model given a :class:`PrefixStore` snapshots its cache after every
pass that fed at least :data:`MIN_TOKENS` positions more than the logit rows it returned (a
prefill: a prompt fed for its last row; a timed or reviewing pass returns all its rows and is
not stored), and a later pass whose tokens start with a stored
snapshot's longer than what its own cache holds starts from a copy of that snapshot (cropped to
the common prefix) instead of refeeding it.

Keys are the snapshot's token ids and a ``tag`` of what else makes its numbers (the
thread count: a cache computed with two threads is not bit-equal to one computed with one).
A restored prefix is the keys and values a prefill of those tokens computed; cropped, they
were computed in a longer pass, as a rolled-back cache's are after every rejection. The
store keeps at most ``max_entries`` snapshots and ``max_bytes`` of them, dropping the least
recently used first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from ewif.base import validate
from simulate.decoder.interface import common_prefix

#: A prefill that feeds fewer positions beyond its rows is not stored (nor is a stored prefix
#: used to save fewer): its copy would cost about what it saves.
MIN_TOKENS = 16


@dataclass(frozen=True)
class Snapshot:
    """A stored prefix: its ``tokens``, the backend's ``payload`` and its ``nbytes``."""

    tokens: tuple[int, ...]
    payload: object
    nbytes: int


class PrefixStore:
    """Snapshots of prefilled caches by their tokens and tag, least recently used dropped
    first beyond ``max_entries`` snapshots or ``max_bytes`` (module docstring)."""

    def __init__(self, max_entries: int = 32, max_bytes: int = 1 << 30) -> None:
        self.max_entries = validate.count("max_entries", max_entries, minimum=1)
        self.max_bytes = validate.count("max_bytes", max_bytes, minimum=1)
        self._entries: OrderedDict[tuple[Hashable, tuple[int, ...]], Snapshot] = OrderedDict()
        self.hits = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes held by the stored snapshots."""
        return sum(s.nbytes for s in self._entries.values())

    def put(self, tokens: Sequence[int], payload: object, nbytes: int, tag: Hashable) -> None:
        """Store ``payload`` (a snapshot of ``nbytes`` bytes holding ``tokens``) under ``tag``;
        a snapshot larger than ``max_bytes`` is not stored."""
        key = (tag, tuple(int(t) for t in tokens))
        self._entries.pop(key, None)
        if nbytes > self.max_bytes or len(key[1]) < MIN_TOKENS:
            return
        self._entries[key] = Snapshot(key[1], payload, int(nbytes))
        while len(self._entries) > self.max_entries or self.nbytes > self.max_bytes:
            self._entries.popitem(last=False)

    def longest(
        self, tokens: Sequence[int], limit: int, tag: Hashable, beyond: int = 0
    ) -> tuple[int, Snapshot] | None:
        """``(p, snapshot)``: the snapshot under ``tag`` sharing the longest prefix with
        ``tokens``, ``p`` that prefix's length capped at ``limit``; None unless ``p`` is at
        least :data:`MIN_TOKENS` more than ``beyond`` (what the caller's cache holds) — at once
        when ``limit`` leaves no such room (every decoding pass: nothing is scanned)."""
        if limit - beyond < MIN_TOKENS:
            return None
        best, found = 0, None
        for key, snapshot in self._entries.items():
            if key[0] == tag:
                p = common_prefix(snapshot.tokens, tokens, limit)
                if p > best:
                    best, found = p, key
        if found is None or best < beyond + MIN_TOKENS:
            return None
        self._entries.move_to_end(found)
        self.hits += 1
        return best, self._entries[found]
