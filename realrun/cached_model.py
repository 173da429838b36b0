"""The KV-cached ``TokenModel`` of every backend: logits over the longest cached prefix.

:class:`CachedTokenModel` serves :meth:`~simulate.decoder.interface.TokenModel.logits` the
same way on transformers (:mod:`realrun.hf_model`) and llama.cpp
(:mod:`realrun.llamacpp_model`): check the request, keep the cache of the longest common
prefix with the previous call (:func:`simulate.decoder.interface.common_prefix`, at most
``len(tokens) − n`` so the last ``n`` positions are computed), feed the rest in one timed
pass, and count it (:class:`realrun.counters.PassCounters`). A backend gives the pass
(``_forward``), the rollback of its cache (``_rollback``) and how to drop it
(``_drop_cache``); it may refuse more requests (``_check_request``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from ewif.base import validate
from realrun.counters import PassCounters, TimingHook


class CachedTokenModel(PassCounters):
    """A ``TokenModel`` over one KV cache (batch size 1); see the module docstring."""

    name: str
    vocab_size: int

    def __init__(self, timing_hook: TimingHook | None = None) -> None:
        PassCounters.__init__(self, timing_hook)
        self._cached: list[int] = []

    def logits(self, tokens: Sequence[int], n: int) -> np.ndarray:
        """Float32 array ``(n, vocab_size)``: scores after each of the last ``n`` prefixes."""
        ids = [int(t) for t in tokens]
        n = validate.count("n", n, minimum=1)
        if n > len(ids):
            raise ValueError(f"n must be in [1, len(tokens)={len(ids)}], got {n}")
        self._check_request(ids, n)
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(
                f"tokens must be ids in [0, {self.vocab_size - 1}] for model {self.name!r}, "
                f"got {bad[0]}"
            )
        keep = self._rollback(ids, len(ids) - n)
        start = time.perf_counter()
        scores = self._forward(ids[keep:], keep, n)
        seconds = time.perf_counter() - start
        self._cached = ids
        self._record(len(ids) - keep, n, seconds)
        return scores

    @property
    def cached_length(self) -> int:
        """Number of positions whose keys/values are in the cache."""
        return len(self._cached)

    def reset(self) -> None:
        """Drop the KV cache (the next call starts from scratch)."""
        self._drop_cache()
        self._cached = []

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
