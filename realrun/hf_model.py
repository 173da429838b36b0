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

Token trees (:meth:`~realrun.cached_model.CachedTokenModel.tree_logits`, the plan of
:mod:`realrun.tree_pass`): one forward pass with a 4D attention mask ``(1, 1, fed,
cached + fed)`` — boolean for SDPA, additive (0 or the dtype's minimum) for eager attention;
flash attention takes no arbitrary mask and is refused — and position ids by depth. The
``DynamicCache`` then holds every node; the next call keeps the accepted path by selecting
its slots in every layer (``_keep_path``: the path's keys and values moved up behind the
prefix, in place, and the rest cut off), so nothing is fed twice.

Prefills kept (``prefix_store``, :mod:`realrun.prefix_store`; each model
:func:`realrun.family.load_family` loads has one): after a pass that fed 16 positions or more
beyond the rows it returned (a prefill), a copy of the cache is stored by its tokens; step 2
starts from a copy of a stored prefix instead when it shares 16 or more positions more with
``tokens`` than the cache does. Without a store the model feeds exactly what the steps above
say (the decoder's pass counts rely on that).

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
from transformers.cache_utils import DynamicLayer

from realrun.cached_model import CachedTokenModel
from realrun.counters import TimingHook
from realrun.prefix_store import PrefixStore
from realrun.tree_pass import PendingTree, TreePass
from simulate.decoder.interface import common_prefix

#: Attention implementations that take an arbitrary 4D mask (a tree's).
TREE_ATTENTION = ("sdpa", "eager")


class HFTokenModel(CachedTokenModel):
    """``TokenModel`` over a transformers causal LM (batch size 1, one KV cache)."""

    def __init__(
        self,
        model: PreTrainedModel,
        name: str,
        *,
        timing_hook: TimingHook | None = None,
        prefix_store: PrefixStore | None = None,
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
        #: Prefilled prompts kept for reuse (:mod:`realrun.prefix_store`; None: none kept, and
        #: the model feeds exactly what the interface's cache contract says).
        self.prefix_store = prefix_store

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

    def _prefilled(self) -> None:
        """Keep a copy of the cache (it holds ``_cached``) in the prefix store."""
        if self.prefix_store is None:
            return
        copy = _copied(self._cache, len(self._cached), self.model.config)
        if copy is not None:
            self.prefix_store.put(self._cached, copy, _nbytes(copy), _tag())

    def _drop_cache(self) -> None:
        self._cache = None

    @property
    def attention(self) -> str:
        """The model's attention implementation (``"sdpa"``, ``"eager"``, …)."""
        return str(getattr(self.model.config, "_attn_implementation", None) or "eager")

    def _forward_tree(self, plan: TreePass) -> np.ndarray:
        if self.attention not in TREE_ATTENTION:
            raise ValueError(
                f"model {self.name!r} uses {self.attention!r} attention, which takes no tree "
                f"mask; load it with attn_implementation in {TREE_ATTENTION}"
            )
        fed = plan.fed
        dtype = self.model.get_output_embeddings().weight.dtype
        allowed = torch.from_numpy(plan.attend()).to(self._device)[None, None]
        if self.attention == "sdpa":
            mask = allowed
        else:
            mask = torch.zeros(allowed.shape, dtype=dtype, device=self._device)
            mask.masked_fill_(~allowed, torch.finfo(dtype).min)
        if self._cache is None:
            self._cache = DynamicCache(config=self.model.config)
        with torch.inference_mode():
            kwargs = {self._cache_kw: self._cache, "use_cache": True, "attention_mask": mask}
            n = plan.rows
            if self._keep_kw == "logits_to_keep" and n < len(fed):
                kwargs[self._keep_kw] = torch.arange(len(fed) - n, len(fed), device=self._device)
            elif self._keep_kw is not None:
                kwargs[self._keep_kw] = n
            out = self.model(
                input_ids=torch.tensor([fed], dtype=torch.long, device=self._device),
                position_ids=torch.tensor([plan.positions()], device=self._device),
                **kwargs,
            )
            return out.logits[0, -n:, :].float().cpu().numpy()

    def _keep_path(self, tree: PendingTree, path: list[int]) -> bool:
        """Every layer's keys and values: the base's, then the path's slots (module
        docstring); False for a cache with other layers (e.g. a sliding window)."""
        cache, base = self._cache, len(tree.base)
        if cache is None or not all(type(layer) is DynamicLayer for layer in cache.layers):
            return False
        end = base + len(path)
        slots = torch.tensor([base + v for v in path], dtype=torch.long, device=self._device)
        with torch.inference_mode():  # the cache's tensors are inference tensors
            for layer in cache.layers:
                if layer.is_initialized:
                    for name in ("keys", "values"):
                        x = getattr(layer, name)
                        if path:  # the path's slots moved up behind the base, in place
                            x[..., base:end, :] = x.index_select(-2, slots)
                        setattr(layer, name, x[..., :end, :])
        return cache.get_seq_length() == end

    def prefix_cache(self, prefix: list[int]) -> DynamicCache | None:
        """A new ``DynamicCache`` holding a copy of this model's keys and values of
        ``prefix`` when its cache holds them (no tree pending, plain dynamic layers), else
        None: a prefill another caller (:func:`realrun.baselines.hf_generate`) need not
        recompute."""
        cache, n = self._cache, len(prefix)
        if cache is None or self._tree is not None or common_prefix(self._cached, prefix) < n:
            return None
        return _copied(cache, n, self.model.config) if n else None

    def _rollback(self, ids: list[int], limit: int) -> int:
        """Keep the cache of the longest common prefix (at most ``limit``), or start from a
        copy of a stored prefill sharing a longer one (:mod:`realrun.prefix_store`); return
        its length."""
        keep = common_prefix(self._cached, ids, limit)
        if self._cache is None:
            keep = 0
        store = self.prefix_store
        hit = None if store is None else store.longest(ids, limit, _tag(), beyond=keep)
        if hit is not None:
            self._cache = _copied(hit[1].payload, hit[0], self.model.config)
            return hit[0]
        if keep == 0:
            self._cache = DynamicCache(config=self.model.config)
            return 0
        if keep < len(self._cached):
            self._cache.crop(keep - len(self._cached))
            if self._cache.get_seq_length() != keep:  # e.g. a sliding-window layer
                self._cache = DynamicCache(config=self.model.config)
                return 0
        return keep


def _copied(cache: DynamicCache, n: int, config) -> DynamicCache | None:
    """A new ``DynamicCache`` holding a copy of ``cache``'s first ``n`` positions; None for a
    cache with other than plain dynamic layers (e.g. a sliding window)."""
    if not all(type(layer) is DynamicLayer for layer in cache.layers):
        return None
    copy = DynamicCache(config=config)
    with torch.inference_mode():
        for i, layer in enumerate(cache.layers):
            copy.update(layer.keys[..., :n, :].clone(), layer.values[..., :n, :].clone(), i)
    return copy


def _nbytes(cache: DynamicCache) -> int:
    """Bytes of ``cache``'s keys and values."""
    return sum(
        x.numel() * x.element_size() for layer in cache.layers for x in (layer.keys, layer.values)
    )


def _tag() -> int:
    """What besides its tokens makes a cache's numbers: the thread count."""
    return torch.get_num_threads()
