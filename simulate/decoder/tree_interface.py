"""What the tree decoder asks of models beyond :mod:`simulate.decoder.interface`.

* :class:`TreeModel` — a :class:`~simulate.decoder.interface.TokenModel` that can verify a
  token tree in one forward pass (tree attention): ``tree_logits(tokens, tree_tokens,
  parents)`` returns, in one pass over the unfed tail of ``tokens`` and every tree node, the
  next-token logits after ``tokens`` (row 0) and after each node ``v`` (row ``v + 1``: after
  ``tokens`` followed by the path from the first level down to ``v``). ``parents[v]`` is node
  ``v``'s parent node, ``-1`` for a node that follows ``tokens`` directly; ``parents[v] < v``.
  Cache contract: as :class:`TokenModel`'s — keep the longest common prefix of ``tokens`` and
  the cached tokens (at most ``len(tokens) − 1``), feed the rest and the tree; afterwards the
  cache must answer a later call whose tokens extend ``tokens`` by a path of the tree and
  more (keeping that path's positions, as a real engine compacts its KV cache to the accepted
  path, or dropping them and feeding them again). A later call with the same ``tokens``
  whose tree keeps these nodes first and adds more (a drafter growing a tree level by
  level) may feed only the new nodes. Results must equal from-scratch passes.
  A TokenModel without ``tree_logits`` is served by :func:`tree_logits`, one ``logits``
  call per leaf path (exact for any model that keeps the cache contract; one pass is still
  what the decoder counts).
* :class:`RankedProposer` — a :class:`~simulate.decoder.interface.Proposer` that also ranks
  several continuations: ``candidates(tokens, prompt_length, count)`` returns up to
  ``count`` distinct token ids that may follow ``tokens``, best first (Max-Gram: the longest
  match's continuation, then other matches', then the bigram fallback). A proposer's tree
  node ``v`` with children of ranks ``1..B`` asks for ``B`` candidates after the path to
  ``v``; a rank beyond those it returns is left out of the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from simulate.decoder.interface import TokenModel

__all__ = ["RankedProposer", "TreeModel", "tree_logits"]


@runtime_checkable
class TreeModel(Protocol):
    """A TokenModel with one-pass tree verification (module docstring)."""

    name: str
    vocab_size: int

    def logits(self, tokens: Sequence[int], n: int) -> np.ndarray: ...

    def tree_logits(
        self, tokens: Sequence[int], tree_tokens: Sequence[int], parents: Sequence[int]
    ) -> np.ndarray: ...


@runtime_checkable
class RankedProposer(Protocol):
    """A Proposer that ranks distinct continuations (module docstring)."""

    name: str
    vocab_size: int

    def propose(self, tokens: Sequence[int], prompt_length: int, k: int) -> list[int]: ...

    def candidates(self, tokens: Sequence[int], prompt_length: int, count: int) -> list[int]: ...


def tree_logits(
    model: TokenModel, tokens: Sequence[int], tree_tokens: Sequence[int], parents: Sequence[int]
) -> np.ndarray:
    """Rows ``0..n`` of :meth:`TreeModel.tree_logits`: the model's own when it has one, else
    one ``logits`` call per leaf path (every node's row comes from the path it ends)."""
    if isinstance(model, TreeModel):
        return model.tree_logits(tokens, tree_tokens, parents)
    n = len(tree_tokens)
    has_child = [False] * n
    for p in parents:
        if p >= 0:
            has_child[p] = True
    rows = np.empty((n + 1, model.vocab_size))
    done = [False] * (n + 1)
    for leaf in [v for v in range(n) if not has_child[v]] or [None]:
        path = []
        v = leaf
        while v is not None and v >= 0:
            path.append(v)
            v = parents[v]
        path.reverse()
        out = model.logits([*tokens, *(tree_tokens[u] for u in path)], len(path) + 1)
        for row, u in zip(out, [-1, *path], strict=True):
            if not done[u + 1]:
                rows[u + 1] = row
                done[u + 1] = True
    return rows
