"""The model interface the token-level cascade is written against.

Two kinds of drafters exist (the terms: :mod:`ewif.kernel.cascade`, "Terms"):

* :class:`TokenModel` — a neural model: a causal LM (real or seeded synthetic) that
  returns next-token logits. It may be a reviewer (one pass over a whole draft) or a leaf drafter
  (autoregressive, one pass per token). It owns a cache of one sequence (batch size 1).
* :class:`Proposer` — a deterministic statistical drafter (Max-Gram, bigram). It always
  is a leaf; its proposals are point masses, so in speculative sampling its draft
  probability is ``q(x) = 1`` for the proposed token.

Token ids are Python ints; the vocabulary ``0..vocab_size-1`` is shared by all models
of one cascade.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TokenModel(Protocol):
    """A causal language model over a shared vocabulary.

    ``logits(tokens, n)`` returns a float array of shape ``(n, vocab_size)`` whose row
    ``i`` holds the (unnormalised, natural-log) next-token scores after the prefix
    ``tokens[: len(tokens) - n + 1 + i]``; i.e. the last ``n`` prefixes of ``tokens``,
    the longest last. ``1 <= n <= len(tokens)``. One call is one forward pass.

    Cache contract: the model may keep state (a KV cache) for the tokens it last saw.
    On each call it keeps the state of the longest common prefix of ``tokens`` and its
    cached tokens, but never beyond ``len(tokens) - n`` (those positions are re-fed so
    their logits can be returned), discards the rest (rollback after a rejection), and
    feeds the remaining tokens in one pass. Results must equal a from-scratch pass.
    The cascade decoder never mutates a ``tokens`` list after passing it, so a model may
    keep that list as the record of its cached tokens. Callers must not write into the
    returned array (it may be a view of a model's internal table).
    """

    name: str
    vocab_size: int

    def logits(self, tokens: Sequence[int], n: int) -> np.ndarray: ...


@runtime_checkable
class Proposer(Protocol):
    """A deterministic drafter: ``propose(tokens, prompt_length, k)`` returns ``k``
    token ids continuing ``tokens`` (whose first ``prompt_length`` ids are the prompt).

    Proposers are free (cost 0 in standardized walltime) and keep no state that must be
    rolled back: the answer depends only on the arguments (and any table built
    beforehand, such as a bigram table).

    Optionally a proposer sets ``last_sources: list[str]`` in ``propose`` — one label per
    proposed token (Max-Gram: ``"prompt"``, ``"generated"``, ``"bigram"``); the cascade
    then reports which sources produced the tokens the target accepted.
    """

    name: str
    vocab_size: int

    def propose(self, tokens: Sequence[int], prompt_length: int, k: int) -> list[int]: ...


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int | None = None) -> int:
    """Length of the longest common prefix of token lists ``a`` and ``b``, at most ``limit``
    — what a model keeps of its cache under the contract above (list slices compare at C
    speed; a bisection finds the first difference)."""
    a, b = list(a), list(b)
    n = min(len(a), len(b), len(a) if limit is None else max(limit, 0))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n - 1  # a[:lo] == b[:lo] and a[:hi + 1] != b[:hi + 1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
