"""Is a model's greedy choice batch-invariant under its numerics?

Speculative decoding is lossless for greedy decoding only if the target's argmax at a
position does not depend on how many positions the pass computes: a review pass over
``m`` positions must pick what ``m`` single passes would. In exact arithmetic it does;
in bfloat16/float16 (and sometimes float32 with another BLAS kernel) the summation order
changes with ``m`` and near-ties can flip.

:func:`batch_invariance` measures it on real text: for each ``(prompt, continuation)``
it walks the continuation in blocks of ``m`` tokens; each block is scored once by one pass
over the ``m`` positions after the cached context, and once by ``m`` single passes; the
argmaxes are compared row by row. It reports the agreement rate and, for every
disagreement, the single-pass logit gap between the two choices and the size of the top
logit (:class:`Disagreement`).

Two rules decide whether a candidate's numerics are *eligible* (:data:`RULES`,
:meth:`Invariance.eligible`):

* ``strict`` — bit-equal greedy: the share of checked positions whose argmax agrees must be
  at least ``min_agreement`` (0.99: with 48 checked positions every one must agree). Greedy
  speculative outputs then equal AR's token for token.
* ``near-ties`` — equal up to the dtype's near-ties: a disagreement whose logit gap is at
  most :data:`NEAR_TIE_STEPS` rounding steps of the dtype at the top logit's size
  (:func:`rounding_step`: one bfloat16 step at a logit of 16–32 is 0.125, one float16 step
  0.0156) counts as an agreement. Faster reduced-precision numerics may then be chosen, and
  a greedy output may differ from AR's where the two choices were that close: the output
  follows the verifying (multi-position) pass, whose distribution is what "lossless" then
  guarantees.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ewif.base import validate
from simulate.decoder.interface import TokenModel

#: The eligibility rules (module docstring); ``strict`` is the default.
RULES = ("strict", "near-ties")
#: Rounding steps of the dtype within which a disagreement is a near-tie.
NEAR_TIE_STEPS = 2
#: Explicit mantissa bits of the dtypes a pass runs in. A llama.cpp ``gguf:…`` file counts as
#: bfloat16: its CPU matrix products quantize activations to 8 bits (Q8 blocks).
_MANTISSA_BITS = {"float64": 52, "float32": 23, "float16": 10, "bfloat16": 7}


def rounding_step(dtype: str, value: float) -> float:
    """The spacing of ``dtype``'s numbers at ``|value|`` (one unit in the last place):
    ``2**(floor(log2 |value|) − mantissa bits)``; a ``gguf:…`` dtype counts as bfloat16
    (:data:`_MANTISSA_BITS`). ``ValueError`` for a dtype it does not know."""
    name = "bfloat16" if dtype.startswith("gguf:") else dtype.removeprefix("torch.")
    if name not in _MANTISSA_BITS:
        raise ValueError(
            f"dtype must be one of {', '.join(_MANTISSA_BITS)} or gguf:…, got {dtype!r}"
        )
    size = abs(float(value))
    exponent = math.frexp(size)[1] - 1 if size > 0 else -126
    return math.ldexp(1.0, exponent - _MANTISSA_BITS[name])


@dataclass(frozen=True)
class Disagreement:
    """One position where the ``m``-position pass chose another token than the single pass:
    the single pass's logit ``gap`` between its choice and the batched choice, and its top
    logit ``top`` (the scale of the dtype's rounding there)."""

    gap: float
    top: float

    def steps(self, dtype: str) -> float:
        """The gap in rounding steps of ``dtype`` at the top logit (:func:`rounding_step`)."""
        return self.gap / rounding_step(dtype, self.top)


@dataclass(frozen=True)
class Invariance:
    """Agreement of the argmax of ``m``-position passes with ``m`` single passes."""

    m: int
    positions: int
    agreements: int
    max_gap: float | None  # largest single-pass logit gap where they disagree (None: none)
    disagreements: tuple[Disagreement, ...] = ()

    @property
    def rate(self) -> float:
        return self.agreements / self.positions if self.positions else 1.0

    def near_ties(self, dtype: str) -> int:
        """Disagreements within :data:`NEAR_TIE_STEPS` rounding steps of ``dtype``."""
        return sum(d.steps(dtype) <= NEAR_TIE_STEPS for d in self.disagreements)

    def eligible(self, rule: str, min_agreement: float, dtype: str) -> bool:
        """Whether these numerics may serve greedy speculative decoding under ``rule``
        (:data:`RULES`, module docstring)."""
        if rule not in RULES:
            raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
        agree = self.agreements + (self.near_ties(dtype) if rule == "near-ties" else 0)
        return (agree / self.positions if self.positions else 1.0) >= min_agreement

    def describe(self, dtype: str) -> str:
        """``47/48 agree; 1 disagreement at logit gap 0.125 (1 bfloat16 step)``."""
        out = f"{self.agreements}/{self.positions} agree"
        if self.disagreements:
            gaps = ", ".join(
                f"{d.gap:.3g} ({d.steps(dtype):.3g} {dtype} step{'s' * (d.steps(dtype) != 1)})"
                for d in sorted(self.disagreements, key=lambda d: d.gap)[:3]
            )
            count = len(self.disagreements)
            out += f"; {count} disagreement{'s' * (count != 1)} at logit gap {gaps}"
            out += " …" if count > 3 else ""
        return out

    def to_dict(self) -> dict:
        return {
            "m": self.m,
            "positions": self.positions,
            "agreements": self.agreements,
            "rate": self.rate,
            "max_gap_at_disagreement": self.max_gap,
            "disagreements": [{"gap": d.gap, "top_logit": d.top} for d in self.disagreements],
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
    found: list[Disagreement] = []
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
                    top = float(single.max())
                    found.append(Disagreement(top - float(single[int(batched[i])]), top))
    max_gap = max((d.gap for d in found), default=None)
    return Invariance(m, positions, agreements, max_gap, tuple(found))
