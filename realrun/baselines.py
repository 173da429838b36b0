"""Baselines run through transformers' own ``generate``: autoregressive, assisted, prompt lookup.

All greedy (``do_sample=False``), batch size 1, with the same ``max_new_tokens`` and EOS as
the cascade runs:

* ``autoregressive`` — ``model.generate`` (the AR reference of every speed-up);
* ``assisted`` — ``generate(assistant_model=drafter)``, transformers' speculative decoding
  with its defaults (transformers 5.x): at most 20 draft tokens a step under the
  ``"constant"`` schedule, cut after the first drafted token whose probability under the
  assistant is below 0.4 (``assistant_confidence_threshold``), so the draft length adapts by
  the threshold alone; ``generation={"num_assistant_tokens_schedule": "heuristic",
  "num_assistant_tokens": 5}`` gives the earlier default, the +2/−1 schedule (+2 after a
  step whose drafted tokens were all accepted, else −1, never below 1); both are replayed at
  our costs in :mod:`simulate.dynamic_draft`;
* ``prompt lookup`` — ``generate(prompt_lookup_num_tokens=k)``, n-gram matching against the
  prompt (transformers' default n-gram size).

Timing excludes the target's prompt prefill, as for the cascade runs. Autoregressive: the
target's KV cache of ``prompt[:-1]`` is built before the clock starts and passed as
``past_key_values``, so ``generate`` feeds the last prompt token and then decodes.
Assisted and prompt lookup: transformers (5.x) produces *wrong* tokens for prompt lookup
when given such a pre-filled cache (observed: greedy output differs from plain greedy), so
these run from scratch and the separately timed prefill passes over ``prompt[:-1]`` (run
just before, same shapes) of the target and of the assistant are subtracted.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, GenerationConfig, PreTrainedModel

from ewif.base import validate


@dataclass(frozen=True)
class HFGeneration:
    """New tokens (EOS included when reached), the wall seconds of decoding (``generate``
    minus the target's prefill) and the target prefill seconds that were excluded."""

    tokens: list[int]
    seconds: float
    prefill_seconds: float


def prefilled_cache(model: PreTrainedModel, prompt: Sequence[int]) -> DynamicCache:
    """KV cache of ``prompt[:-1]`` (empty for a one-token prompt)."""
    cache = DynamicCache(config=model.config)
    device = model.get_output_embeddings().weight.device
    if len(prompt) > 1:
        with torch.inference_mode():
            model(
                input_ids=torch.tensor([list(prompt[:-1])], device=device),
                **{_cache_kw(model): cache},
                use_cache=True,
            )
    return cache


def hf_generate(
    model: PreTrainedModel,
    prompt: Sequence[int],
    max_new_tokens: int,
    eos_token_id: int | None = None,
    *,
    assistant_model: PreTrainedModel | None = None,
    prompt_lookup_num_tokens: int | None = None,
    generation: Mapping[str, Any] | None = None,
    prefilled: DynamicCache | None = None,
) -> HFGeneration:
    """Greedy ``model.generate`` on one prompt (token ids), optionally assisted by
    ``assistant_model`` or by prompt lookup with ``prompt_lookup_num_tokens`` draft tokens;
    ``generation`` adds ``GenerationConfig`` fields (e.g. ``num_assistant_tokens``, as
    ``csd recommend --emit transformers`` prints them). ``prefilled``: the target's cache of
    ``prompt[:-1]`` built by the caller (autoregressive only; its prefill is then not run)."""
    if not isinstance(model, PreTrainedModel):
        raise TypeError(f"model must be a transformers PreTrainedModel, got {type(model)!r}")
    ids = validate.prompt("prompt", prompt)
    max_new_tokens = validate.count("max_new_tokens", max_new_tokens, minimum=1)
    if assistant_model is not None and prompt_lookup_num_tokens is not None:
        raise ValueError("give assistant_model or prompt_lookup_num_tokens, not both")
    extra: dict = {}
    lookup: dict = {}
    if assistant_model is not None:
        if not isinstance(assistant_model, PreTrainedModel):
            raise TypeError(
                f"assistant_model must be a PreTrainedModel, got {type(assistant_model)!r}"
            )
        extra["assistant_model"] = assistant_model
    if prompt_lookup_num_tokens is not None:
        lookup["prompt_lookup_num_tokens"] = validate.count(
            "prompt_lookup_num_tokens", prompt_lookup_num_tokens, minimum=1
        )
    pad = eos_token_id if eos_token_id is not None else model.config.pad_token_id
    config = GenerationConfig(
        do_sample=False,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos_token_id,
        pad_token_id=pad,
        temperature=None,
        top_p=None,
        top_k=None,
        **lookup,
        **dict(generation or {}),
    )
    device = model.get_output_embeddings().weight.device
    if prefilled is not None and (extra or lookup or prefilled.get_seq_length() != len(ids) - 1):
        raise ValueError(
            f"prefilled must hold prompt[:-1] ({len(ids) - 1} positions) and serve plain "
            f"autoregressive decoding, got {prefilled.get_seq_length()} positions"
        )
    start = time.perf_counter()
    cache = prefilled_cache(model, ids) if prefilled is None else prefilled
    if assistant_model is not None:  # its own prefill, subtracted like the target's
        prefilled_cache(assistant_model, ids)
    _sync(device)
    prefill = time.perf_counter() - start
    assisted = bool(extra or lookup)
    if assisted:
        cache = None  # see the module docstring: generate from scratch, subtract the prefill
    input_ids = torch.tensor([ids], device=device)
    start = time.perf_counter()
    with torch.inference_mode(), _assistant_call_quiet():
        out = model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            generation_config=config,
            **{_cache_kw(model): cache},
            **extra,
        )
    _sync(device)
    seconds = time.perf_counter() - start - (prefill if assisted else 0.0)
    tokens = [int(t) for t in out[0, len(ids) :].tolist()]
    if eos_token_id is not None and eos_token_id in tokens:
        tokens = tokens[: tokens.index(eos_token_id) + 1]
    return HFGeneration(tokens, max(seconds, 0.0), prefill)


class _AssistantCallFilter(logging.Filter):
    """Drops one warning that transformers' assisted generation gives about itself: its own
    candidate generator calls the assistant's ``generate`` with ``generation_config`` and
    ``min_new_tokens``/``max_new_tokens`` together, which ``generate`` then reports as
    deprecated (nothing a caller of ``generate`` can change)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "together with generation-related arguments" not in record.getMessage()


@contextlib.contextmanager
def _assistant_call_quiet() -> Iterator[None]:
    """:class:`_AssistantCallFilter` on transformers' generation logger while in the block."""
    logger = logging.getLogger("transformers.generation.utils")
    quiet = _AssistantCallFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _cache_kw(model: PreTrainedModel) -> str:
    """transformers 5.x renamed ``past_key_values`` to ``cache``; use what the model takes."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
