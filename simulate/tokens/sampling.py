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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ewif import _validate


@dataclass(frozen=True)
class Decoding:
    """Greedy (``temperature=0``) or temperature + top-p sampling."""

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        t = _validate.cost("temperature", self.temperature)
        p = _validate.probability("top_p", self.top_p)
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
        if self.greedy:
            out = np.zeros_like(z)
            idx = np.argmax(z, axis=-1)
            np.put_along_axis(out, np.expand_dims(idx, -1), 1.0, axis=-1)
            return out
        if self.temperature != 1.0:
            z = z / self.temperature
        z = np.exp(z - z.max(axis=-1, keepdims=True))
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
    """One draw from the distribution ``p`` (1-D, non-negative, positive sum) by
    inverse CDF; zero-probability tokens are never drawn."""
    cdf = p.cumsum()
    i = int(cdf.searchsorted(rng.random() * cdf[-1], side="right"))
    if i == len(cdf):  # u * total rounded up to total: take the last token with mass
        i = int(np.flatnonzero(p)[-1])
    return i
