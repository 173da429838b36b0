"""One forward pass over a token tree on a KV-cached real model: the plan every backend feeds.

A tree pass (:meth:`simulate.decoder.tree_interface.TreeModel.tree_logits`) feeds, after the
cached prefix of ``start`` positions, the unfed ``tail`` of the sequence and then the tree's
nodes (node ``v``'s parent ``parents[v] < v``, ``-1`` for a node that follows the sequence
directly). With ``base = start + len(tail)``:

* **positions by depth**: the tail sits at ``start..base − 1``, node ``v`` at
  ``base + depth(v) − 1`` (``depth = 1`` below the root) — the position it would have in its
  own root-to-node path, so rotary embeddings see each path as a plain sequence;
* **tree attention**: a tail token attends to the prefix and the tail up to itself; node
  ``v`` to the prefix, the tail, and the nodes on its path (its ancestors and itself);
* **the cache layout**: the prefix, then the nodes already in the cache (``old`` of them, a
  previous pass over the first nodes of the same tree: a drafter growing a tree level by
  level feeds only the new level), then what this pass feeds; node ``u`` occupies slot
  ``base + u`` (:meth:`TreePass.attend`).

Afterwards the cache holds the prefix and every node; the next call keeps the accepted path
only (:class:`PendingTree`, :func:`accepted_path`), as an engine compacts its KV cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PendingTree", "TreePass", "accepted_path", "check_tree", "extends"]


def check_tree(
    tree_tokens: Sequence[int], parents: Sequence[int], vocab_size: int, model: str
) -> tuple[list[int], list[int]]:
    """The nodes' tokens and parents as int lists; ``ValueError`` naming the bad value: one
    parent per node, ``-1 <= parents[v] < v``, token ids in ``[0, vocab_size)``."""
    tokens = [int(t) for t in tree_tokens]
    par = [int(p) for p in parents]
    if len(par) != len(tokens):
        raise ValueError(
            f"parents must give one parent per tree node ({len(tokens)}), got {len(par)}"
        )
    for v, p in enumerate(par):
        if not -1 <= p < v:
            raise ValueError(f"parents[{v}] must be in [-1, {v - 1}] (a node before it), got {p}")
    bad = [t for t in tokens if not 0 <= t < vocab_size]
    if bad:
        raise ValueError(
            f"tree tokens must be ids in [0, {vocab_size - 1}] for model {model!r}, got {bad[0]}"
        )
    return tokens, par


def depths(parents: Sequence[int]) -> list[int]:
    """Depth of every node (1 for a child of the root)."""
    out: list[int] = []
    for p in parents:
        out.append(1 if p < 0 else out[p] + 1)
    return out


def path_to(parents: Sequence[int], v: int) -> list[int]:
    """The nodes from depth 1 down to ``v``."""
    out = []
    while v >= 0:
        out.append(v)
        v = parents[v]
    return out[::-1]


@dataclass(frozen=True)
class TreePass:
    """What one tree pass feeds (module docstring): ``tail`` at positions ``start..``, then
    the nodes ``old..`` of the tree ``tokens``/``parents`` (nodes ``0..old − 1`` are cached)."""

    tail: list[int]
    start: int
    tokens: list[int]
    parents: list[int]
    old: int = 0

    def __post_init__(self) -> None:
        if self.tail and self.old:
            raise ValueError("a pass extending a cached tree feeds no tail")

    @property
    def base(self) -> int:
        """Positions before the first node (the prefix and the tail)."""
        return self.start + len(self.tail)

    @property
    def fed(self) -> list[int]:
        """The token ids this pass feeds, in order."""
        return self.tail + self.tokens[self.old :]

    @property
    def rows(self) -> int:
        """Logit rows returned: the tail's last position (the root's row) and every new node."""
        return (1 if self.tail else 0) + len(self.tokens) - self.old

    def positions(self) -> list[int]:
        """The position id of every fed token."""
        d = depths(self.parents)
        tail = list(range(self.start, self.base))
        return tail + [self.base + d[v] - 1 for v in range(self.old, len(self.tokens))]

    def attend(self) -> np.ndarray:
        """Boolean ``(fed, cached + fed)`` matrix: row ``i`` marks the cache slots the ``i``-th
        fed token attends to (module docstring)."""
        n_tail, base = len(self.tail), self.base
        out = np.zeros((len(self.fed), base + len(self.tokens)), dtype=bool)
        for i in range(n_tail):
            out[i, : self.start + i + 1] = True
        for row, v in enumerate(range(self.old, len(self.tokens)), start=n_tail):
            out[row, :base] = True
            out[row, [base + u for u in path_to(self.parents, v)]] = True
        return out


@dataclass(frozen=True)
class PendingTree:
    """A tree whose nodes sit in the cache after ``base`` (the sequence it followed), with
    the rows of its pass: row 0 after ``base``, row ``v + 1`` after node ``v``."""

    base: list[int]
    tokens: list[int]
    parents: list[int]
    rows: np.ndarray

    def position(self, v: int) -> int:
        """Node ``v``'s position."""
        return len(self.base) + depths(self.parents)[v] - 1


def extends(pending: PendingTree | None, ids: list[int], tokens: list[int], parents: list[int]):
    """True when a pass over ``tokens``/``parents`` after ``ids`` only adds nodes to the
    cached ``pending`` tree (same sequence, same first nodes)."""
    if pending is None or pending.base != ids:
        return False
    k = len(pending.tokens)
    return k <= len(tokens) and pending.tokens == tokens[:k] and pending.parents == parents[:k]


def accepted_path(pending: PendingTree, ids: Sequence[int]) -> list[int]:
    """The longest root-to-node path of ``pending`` that ``ids`` follows after its ``base``
    (empty when ``ids`` does not start with the base): the nodes whose cache a later call
    keeps."""
    n = len(pending.base)
    if len(ids) <= n or list(ids[:n]) != pending.base:
        return []
    children: dict[int, list[int]] = {}
    for v, p in enumerate(pending.parents):
        children.setdefault(p, []).append(v)
    path: list[int] = []
    v = -1
    for token in ids[n:]:
        nxt = next((c for c in children.get(v, []) if pending.tokens[c] == token), None)
        if nxt is None:
            break
        path.append(nxt)
        v = nxt
    return path
