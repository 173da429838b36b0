"""A Hugging Face causal LM as a :class:`simulate.decoder.interface.TokenModel`.

``logits(tokens, n)`` follows the interface's cache contract with a transformers
``DynamicCache`` holding the keys/values of ``cached`` (the tokens last fed):

1. ``p`` = length of the longest common prefix of ``tokens`` and ``cached``, capped at
   ``len(tokens) - n`` (the last ``n`` positions are always re-fed, because their
   logits are returned);
2. rollback: crop the cache to ``p`` positions (``DynamicCache.crop(p - len(cached))``);
3. one forward pass over ``tokens[p:]`` with ``logits_to_keep=n``: the LM head runs on
   the last ``n`` positions only, and only those ``n x V`` scores are copied to the host
   (as float32 numpy), so the model may live on a GPU.

Row ``i`` of the result is the next-token score vector after ``tokens[:len-n+1+i]``;
causal attention makes it equal, up to floating-point summation order, to a pass over
``tokens`` from scratch (tested). Counters: ``passes`` (forward passes), ``tokens_fed``
(positions computed) and ``pass_sizes`` (passes by positions ``m``); an optional
``timing_hook(fed, seconds)`` sees the wall time of every pass (forward + copy to host,
which synchronises a GPU).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence

import numpy as np
import torch
from transformers import DynamicCache, PreTrainedModel

from ewif import validate
from realrun.counters import PassCounters, TimingHook
from simulate.decoder.interface import common_prefix


class HFTokenModel(PassCounters):
    """``TokenModel`` over a transformers causal LM (batch size 1, one KV cache)."""

    def __init__(
        self, model: PreTrainedModel, name: str, *, timing_hook: TimingHook | None = None
    ) -> None:
        if not isinstance(model, PreTrainedModel):
            raise TypeError(f"model must be a transformers PreTrainedModel, got {type(model)!r}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self.model = model
        self.name = name
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        PassCounters.__init__(self, timing_hook)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = next(
            (k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None
        )
        self._device = model.get_output_embeddings().weight.device
        self._cache: DynamicCache | None = None
        self._cached: list[int] = []

    def logits(self, tokens: Sequence[int], n: int) -> np.ndarray:
        """Float32 array ``(n, vocab_size)``: scores after each of the last ``n`` prefixes."""
        ids = [int(t) for t in tokens]
        n = validate.count("n", n, minimum=1)
        if n > len(ids):
            raise ValueError(f"n must be in [1, len(tokens)={len(ids)}], got {n}")
        bad = [t for t in ids if not 0 <= t < self.vocab_size]
        if bad:
            raise ValueError(
                f"tokens must be ids in [0, {self.vocab_size - 1}] for model {self.name!r}, "
                f"got {bad[0]}"
            )
        keep = self._rollback(ids, len(ids) - n)
        fed = ids[keep:]
        start = time.perf_counter()
        with torch.inference_mode():
            kwargs = {self._cache_kw: self._cache, "use_cache": True}
            if self._keep_kw is not None:
                kwargs[self._keep_kw] = n
            out = self.model(
                input_ids=torch.tensor([fed], dtype=torch.long, device=self._device), **kwargs
            )
            scores = out.logits[0, -n:, :].float().cpu().numpy()
        seconds = time.perf_counter() - start
        self._cached = ids
        self._record(len(fed), seconds)
        return scores

    @property
    def cached_length(self) -> int:
        """Number of positions whose keys/values are in the cache."""
        return len(self._cached)

    def reset(self) -> None:
        """Drop the KV cache (the next call starts from scratch)."""
        self._cache = None
        self._cached = []

    def _rollback(self, ids: list[int], limit: int) -> int:
        """Keep the cache of the longest common prefix (at most ``limit``); return its length."""
        keep = common_prefix(self._cached, ids, limit)
        if keep == 0 or self._cache is None:
            self._cache = DynamicCache(config=self.model.config)
            return 0
        if keep < len(self._cached):
            self._cache.crop(keep - len(self._cached))
            if self._cache.get_seq_length() != keep:  # e.g. a sliding-window layer
                self._cache = DynamicCache(config=self.model.config)
                return 0
        return keep
