"""Is a model's greedy choice batch-invariant under its numerics?

Speculative decoding is lossless for greedy decoding only if the target's argmax at a
position does not depend on how many positions the pass computes: a review pass over
``m`` positions must pick what ``m`` single passes would. In exact arithmetic it does;
in bfloat16/float16 (and sometimes float32 with another BLAS kernel) the summation order
changes with ``m`` and near-ties can flip.

:func:`batch_invariance` measures it on real text: for each ``(prompt, continuation)``
it walks the continuation in blocks of ``m`` tokens; each block is scored once by one pass
over the ``m`` positions after the cached context, and once by ``m`` single passes; the
argmaxes are compared row by row. It reports the agreement rate and, where they
disagree, the single-pass logit gap between the two choices (a near-tie has a gap of the
order of the dtype's rounding).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ewif.base import validate
from simulate.decoder.interface import TokenModel


@dataclass(frozen=True)
class Invariance:
    """Agreement of the argmax of ``m``-position passes with ``m`` single passes."""

    m: int
    positions: int
    agreements: int
    max_gap: float | None  # largest single-pass logit gap where they disagree (None: none)

    @property
    def rate(self) -> float:
        return self.agreements / self.positions if self.positions else 1.0

    def to_dict(self) -> dict:
        return {
            "m": self.m,
            "positions": self.positions,
            "agreements": self.agreements,
            "rate": self.rate,
            "max_gap_at_disagreement": self.max_gap,
        }


def batch_invariance(
    model: TokenModel,
    texts: Sequence[tuple[Sequence[int], Sequence[int]]],
    m: int = 4,
    max_positions: int | None = None,
) -> Invariance:
    """Agreement of ``model``'s argmax between one pass over ``m`` positions and ``m``
    single passes, over blocks of each ``(prompt, continuation)`` in ``texts`` (module
    docstring); at most ``max_positions`` positions in all."""
    m = validate.count("m", m, minimum=1)
    limit = (
        None if max_positions is None else validate.count("max_positions", max_positions, minimum=1)
    )
    positions = agreements = 0
    max_gap = None
    for prompt, continuation in texts:
        ctx, cont = validate.prompt("prompt", prompt), [int(t) for t in continuation]
        for start in range(0, len(cont) - m + 1, m):
            if limit is not None and positions >= limit:
                break
            before = ctx + cont[:start]
            block = cont[start : start + m]
            model.logits(before, 1)  # cache the context
            batched = np.argmax(model.logits(before + block, m), axis=-1)
            model.logits(before, 1)
            for i in range(m):
                single = model.logits(before + block[: i + 1], 1)[0]
                positions += 1
                if int(np.argmax(single)) == int(batched[i]):
                    agreements += 1
                else:
                    gap = float(single.max() - single[int(batched[i])])
                    max_gap = gap if max_gap is None else max(max_gap, gap)
    return Invariance(m, positions, agreements, max_gap)
