"""The autoregressive reference, decoded as the run decodes it.

Every speed-up of a run is measured against one AR method (:mod:`realrun.side_by_side`):
transformers' own ``generate`` for greedy decoding of a transformers model (the decoding
users compare with), otherwise our decoder with the target alone (``K`` empty). The
measuring phase times the *same* method making the *same* call (:func:`ar_timer`, used by
:func:`realrun.timing.time_family`: each round generates one measuring prompt from its
prompt up to the run's ``max_new_tokens``), so the unit of every cost curve — one AR token —
is what the run's AR pays, its loop, its sampler and its per-call setup included. Prompt
prefill is excluded in both.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from realrun.baselines import hf_generate
from realrun.hf_model import HFTokenModel
from realrun.timing import ARTimer
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.interface import TokenModel
from simulate.decoder.sampling import Decoding


def hf_reference(target: TokenModel, decoding: Decoding) -> bool:
    """True when the run's AR is transformers' ``generate`` (greedy, transformers model)."""
    return decoding.greedy and isinstance(target, HFTokenModel)


def ar_timer(
    target: TokenModel, decoding: Decoding, eos_token_id: int | None = None, seed: int = 0
) -> ARTimer:
    """``(context, n) -> (tokens, seconds)``: the run's AR method decoding up to ``n`` tokens
    after ``context`` (stopping at ``eos_token_id``), prompt prefill outside the clock (on
    transformers taken from the target's own cache when it holds the prompt, as in every
    timing round: :meth:`realrun.hf_model.HFTokenModel.prefix_cache`)."""
    if hf_reference(target, decoding):
        assert isinstance(target, HFTokenModel)

        def hf(context: Sequence[int], n: int) -> tuple[int, float]:
            prefix = [int(t) for t in context[:-1]]
            prefilled = target.prefix_cache(prefix) if prefix else None
            g = hf_generate(target.model, context, n, eos_token_id, prefilled=prefilled)
            return len(g.tokens), g.seconds

        return hf
    decoder = CascadeDecoder([target], np.zeros((0, 0), np.int64), decoding=decoding, seed=seed)

    def ours(context: Sequence[int], n: int) -> tuple[int, float]:
        target.logits(context, 1)  # prefill outside the clock
        start = time.perf_counter()
        res = decoder.generate(context, n, eos_token_id)
        return len(res.tokens), time.perf_counter() - start

    return ours
