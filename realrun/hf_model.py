"""A Hugging Face causal LM as a :class:`simulate.decoder.interface.TokenModel`.

``logits(tokens, n)`` follows the interface's cache contract with a transformers
``DynamicCache`` holding the keys/values of ``cached`` (the tokens last fed):

1. ``p`` = length of the longest common prefix of ``tokens`` and ``cached``, capped at
   ``len(tokens) - n`` (the last ``n`` positions are always re-fed, because their
   logits are returned);
2. rollback: crop the cache to ``p`` positions (``DynamicCache.crop(p - len(cached))``);
3. one forward pass over ``tokens[p:]`` with ``logits_to_keep``: the LM head runs on
   the last ``n`` positions only, and only those ``n x V`` scores are copied to the host
   (as float32 numpy), so the model may live on a GPU.

The kept positions go in as a tensor of indices, not the count ``n``: transformers slices
an int as ``hidden[:, -n:, :]``, a view whose batch stride is that of the whole pass, and
torch's bfloat16 ``linear`` on the CPU does not fold such a 3-d view into one matrix
product — it multiplies batch-wise and copies the LM head's weight on every call (Qwen2.5
0.5B on an AMX Xeon: a catch-up pass of 2 positions with 1 row took 657 ms against 82 ms
for all rows; index tensors gather the rows into a fresh tensor, 86 ms).

Row ``i`` of the result is the next-token score vector after ``tokens[:len-n+1+i]``;
causal attention makes it equal, up to floating-point summation order, to a pass over
``tokens`` from scratch (tested). Counters: ``passes`` (forward passes), ``tokens_fed``
(positions computed) and ``pass_sizes`` (passes by positions ``m``); an optional
``timing_hook(fed, seconds)`` sees the wall time of every pass (forward + copy to host,
which synchronises a GPU).
"""

from __future__ import annotations

import inspect

import numpy as np
import torch
from transformers import DynamicCache, PreTrainedModel

from realrun.cached_model import CachedTokenModel
from realrun.counters import TimingHook
from simulate.decoder.interface import common_prefix


class HFTokenModel(CachedTokenModel):
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
        CachedTokenModel.__init__(self, timing_hook)
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._keep_kw = next(
            (k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None
        )
        self._device = model.get_output_embeddings().weight.device
        self._cache: DynamicCache | None = None

    def _forward(self, fed: list[int], start: int, n: int) -> np.ndarray:
        with torch.inference_mode():
            kwargs = {self._cache_kw: self._cache, "use_cache": True}
            if self._keep_kw == "logits_to_keep" and n < len(fed):  # module docstring
                kwargs[self._keep_kw] = torch.arange(len(fed) - n, len(fed), device=self._device)
            elif self._keep_kw is not None:
                kwargs[self._keep_kw] = n
            out = self.model(
                input_ids=torch.tensor([fed], dtype=torch.long, device=self._device), **kwargs
            )
            return out.logits[0, -n:, :].float().cpu().numpy()

    def _drop_cache(self) -> None:
        self._cache = None

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
