"""The drafter's confidence along the target's text: what a confidence threshold stops on.

transformers' assisted generation stops a draft after a token whose probability under the
assistant is below ``assistant_confidence_threshold`` (:mod:`simulate.dynamic_draft`). To
replay that rule over measured acceptance traces, each position ``t`` of a measuring
continuation needs ``q_t``: the drafter's probability of its own greedy token there,
teacher-forced on the target's text (the prefixes the acceptance traces of
:mod:`realrun.measure` are scored on), ``q_t = max softmax(z_t)`` of the drafter's raw logits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulate.decoder.interface import TokenModel


def draft_confidence(
    drafter: TokenModel, contexts: Sequence[tuple[Sequence[int], Sequence[int]]]
) -> list[np.ndarray]:
    """Per ``(prompt, continuation)``: ``q_t`` at each position of the continuation (module
    docstring), one drafter pass over the whole text."""
    if not isinstance(drafter, TokenModel):
        raise TypeError(f"drafter must be a TokenModel, got {type(drafter).__name__}")
    out = []
    for prompt, continuation in contexts:
        seq = [int(t) for t in prompt] + [int(t) for t in continuation]
        T = len(continuation)
        if T == 0:
            out.append(np.zeros(0))
            continue
        z = np.asarray(drafter.logits(seq, T + 1)[:T], dtype=np.float64)
        z -= z.max(axis=-1, keepdims=True)
        out.append(1.0 / np.exp(z).sum(axis=-1))  # the top token's probability: e^0 / Σ e^z
    return out
