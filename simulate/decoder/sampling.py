"""Decoding: how every model's logits become a next-token distribution.

One :class:`Decoding` is applied identically to the logits of every model of a cascade
(target and drafters), so the distributions the review step compares are the ones the
models would sample from on their own.

* ``temperature == 0`` — greedy: the next token is ``argmax`` of the logits (ties go to
  the lowest id, numpy's convention). ``top_p`` plays no role (the argmax always
  survives nucleus filtering).
* ``temperature > 0`` — sampling from ``p = softmax(logits / temperature)`` restricted to
  the nucleus: the smallest set of highest-probability tokens whose mass reaches
  ``top_p`` (ranked by probability, ties by lowest id; a token is kept iff the mass of
  the tokens ranked strictly before it is ``< top_p``), renormalised.

Every temperature in ``(0, max float]`` is computed without overflow: with
``m = max z``, ``softmax(z / T)_i = exp((z_i - m) / T) / Σ_j exp((z_j - m) / T)``, and the
exponents are formed as ``(z - m) / T`` for ``T < 1`` and as ``(z/2 - m/2) / (T/2)`` for
``T >= 1`` (halving is exact for such ``T`` and for normal ``z``, and ``z/2 - m/2``
cannot overflow). The difference ``z - m <= 0`` is exact when ``z`` is close to ``m``
(Sterbenz), and an exponent that overflows to ``-inf`` is exactly below ``-max float``,
whose ``exp`` is 0 anyway. The maximum contributes ``exp(0) = 1``, so every row sums to
a number in ``[1, V]`` and normalises to a finite distribution. As ``T → 0`` this tends
to the uniform distribution over the tied maxima of the logits (one-hot on a unique
argmax), which is what tiny temperatures return; ``T == 0`` exactly is greedy decoding,
which breaks ties by the lowest id. Logits may be ``-inf`` (masked tokens); a NaN or
``+inf`` logit, or a row with every logit ``-inf``, defines no distribution and is
refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ewif.base import validate


@dataclass(frozen=True)
class Decoding:
    """Greedy (``temperature=0``) or temperature + top-p sampling."""

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        t = validate.cost("temperature", self.temperature)
        p = validate.probability("top_p", self.top_p)
        if p <= 0.0:
            raise ValueError(f"top_p must be a finite number in (0, 1], got {self.top_p!r}")
        object.__setattr__(self, "temperature", t)
        object.__setattr__(self, "top_p", p)

    @property
    def greedy(self) -> bool:
        """True for temperature 0 (argmax decoding)."""
        return self.temperature == 0.0

    def probs(self, logits: np.ndarray) -> np.ndarray:
        """Next-token distributions for logits of shape ``(V,)`` or ``(n, V)``.

        Rows sum to 1. Greedy decoding returns the one-hot row of the argmax, so the
        result is the distribution the model samples from in every mode.
        """
        z = np.asarray(logits, dtype=np.float64)
        m = z.max(axis=-1, keepdims=True)
        if not np.isfinite(m).all():  # max is NaN on a NaN, +inf on a +inf, -inf if all -inf
            bad = m[~np.isfinite(m)].flat[0]
            raise ValueError(
                "logits must be numbers < +inf (-inf masks a token) with at least one "
                f"finite entry per row, got a row whose maximum is {bad!r}"
            )
        if self.greedy:
            out = np.zeros_like(z)
            idx = np.argmax(z, axis=-1)
            np.put_along_axis(out, np.expand_dims(idx, -1), 1.0, axis=-1)
            return out
        t = self.temperature
        with np.errstate(over="ignore"):  # an exponent overflowing to -inf is exact: exp = 0
            if t < 1.0:
                z = np.exp((z - m) / t)
            else:
                z = np.exp((0.5 * z - 0.5 * m) / (0.5 * t))
        if self.top_p < 1.0:
            z *= _nucleus(z, self.top_p)
        z /= z.sum(axis=-1, keepdims=True)
        return z


def _nucleus(weights: np.ndarray, top_p: float) -> np.ndarray:
    """0/1 mask of the top-p nucleus of each row of unnormalised ``weights``."""
    order = np.argsort(-weights, axis=-1, kind="stable")
    ranked = np.take_along_axis(weights, order, axis=-1)
    before = np.cumsum(ranked, axis=-1) - ranked
    keep_ranked = before < top_p * ranked.sum(axis=-1, keepdims=True)
    mask = np.empty_like(weights)
    np.put_along_axis(mask, order, keep_ranked.astype(weights.dtype), axis=-1)
    return mask


def sample(p: np.ndarray, rng: np.random.Generator) -> int:
    """One draw from the distribution ``p`` (1-D, non-negative, positive finite sum) by
    inverse CDF; zero-probability tokens are never drawn.

    A NaN or infinite entry makes the total ``cdf[-1]`` NaN or infinite and is refused
    (``ValueError``): a broken distribution never turns into a token id silently.
    """
    cdf = p.cumsum()
    total = float(cdf[-1]) if len(cdf) else 0.0
    if not (0.0 < total < math.inf):
        raise ValueError(
            f"sample needs a distribution with a positive finite sum, got sum {total!r} "
            f"over {len(cdf)} tokens"
        )
    i = int(cdf.searchsorted(rng.random() * total, side="right"))
    if i == len(cdf):  # u * total rounded up to total: take the last token with mass
        i = int(np.flatnonzero(p)[-1])
    return i
