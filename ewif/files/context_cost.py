"""How each pass's cost moves with the cached context length: the ``context_cost`` key of a
model set (``csd.models/6``), read and checked here; :meth:`ContextCost.curves_at` prices a
context length.

A pass over ``m`` positions after ``L`` cached tokens pays for its weights (nearly
independent of ``L``) and for attention and the KV cache's own handling, which grow with
``L``. Measured on a CPU (transformers, float16, Qwen2.5-Coder 1.5B): a one-token pass took
111 ms after 128 tokens and 172 ms after 1,024; a pass over 16 positions 1,219 and 1,318 ms
— the growth is mostly per pass, not per position, so in units of one autoregressive token
at the same context a review pass gets *cheaper* as the context grows. One curve measured
at one context length then misprices a workload at another. The key holds the first-order
model

    c_i(m, L) = c_i(m) + (L − tokens)·slope_i(m),    a(L) = 1 + (L − ar_tokens)·ar_slope,

in the unit of the curves (one autoregressive token at the measuring contexts): ``tokens``
is the mean context length the curves were timed at, ``slope_i(m)`` each model's cost per
context token (one value per ``m`` of its curve; beyond, the last), ``a(L)`` the cost of
one autoregressive token at ``L`` (its reference ``ar_tokens``, the mean context of the
timed autoregressive generations). At ``L`` the cascade is priced by the curves
``c_i(m, L) / a(L)`` (the target's first point stays 1: the unit at ``L`` is the
autoregressive token at ``L``), clipped at 0. ``span`` is the range of context lengths
the fit saw, and a first-order fit is not extrapolated: a length outside it is priced at the
span's nearest edge (:meth:`ContextCost.priced_length`; a 766-token prompt after a fit over
46–195 tokens had priced an AR token at −5.6). In a file::

    context_cost:
      tokens: 420.0                 # mean context of the timed passes
      ar_tokens: 412.0              # mean context of the timed AR generations
      ar_slope: 0.00061             # AR token's cost per context token (AR tokens)
      slope: [[0.00061, 0.0006], [0.00027, 0.00028], [0.0]]   # per model, per m
      span: [96, 1140]              # context lengths the fit saw
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ewif.base import validate


@dataclass(frozen=True)
class ContextCost:
    """The context-length model of the module docstring."""

    tokens: float
    ar_tokens: float
    ar_slope: float
    slope: tuple[np.ndarray, ...]
    span: tuple[float, float]

    def __post_init__(self) -> None:
        validate.cost("context_cost.tokens", self.tokens)
        validate.cost("context_cost.ar_tokens", self.ar_tokens)
        validate.real("context_cost.ar_slope", self.ar_slope)
        low, high = (validate.cost("context_cost.span", v) for v in self.span)
        if low > high:
            raise ValueError(
                f"context_cost.span must be [low, high], low <= high, got {[low, high]}"
            )
        for i, s in enumerate(self.slope):
            if s.ndim != 1 or s.size == 0 or not np.isfinite(s).all():
                raise ValueError(
                    f"context_cost.slope[{i}] (model {i}) must be a non-empty list of finite "
                    f"numbers, got {s.tolist()!r}"
                )

    @property
    def n_models(self) -> int:
        return len(self.slope)

    def priced_length(self, length: float) -> float:
        """The context length ``L`` is priced at: ``L`` held inside :attr:`span` (module
        docstring)."""
        return float(np.clip(validate.real("context length", length), *self.span))

    def unit_at(self, length: float) -> float:
        """``a(L)``: one autoregressive token at context length ``L``, in the curves' unit."""
        unit = 1.0 + (self.priced_length(length) - self.ar_tokens) * self.ar_slope
        if not unit > 0:
            raise ValueError(
                f"context length {length:g} prices an autoregressive token at {unit:.3g} <= 0: "
                f"the fit over {self.span[0]:g}..{self.span[1]:g} tokens does not admit it"
            )
        return unit

    def curves_at(self, curves: Sequence[np.ndarray], length: float) -> tuple[np.ndarray, ...]:
        """The cost curves at context length ``length``: ``c_i(m, L) / a(L)``, the target's
        first point 1, clipped at 0, ``L`` held inside the span (module docstring)."""
        if len(curves) != self.n_models:
            raise ValueError(
                f"context_cost holds slopes of {self.n_models} models, the curves {len(curves)}"
            )
        unit, shift = self.unit_at(length), self.priced_length(length) - self.tokens
        out = []
        for curve, s in zip(curves, self.slope, strict=True):
            c = np.asarray(curve, dtype=float)
            per_m = np.concatenate([s, np.full(max(c.size - s.size, 0), s[-1])])[: c.size]
            out.append(np.maximum((c + shift * per_m) / unit, 0.0))
        out[0][0] = 1.0
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "ar_tokens": self.ar_tokens,
            "ar_slope": self.ar_slope,
            "slope": [s.tolist() for s in self.slope],
            "span": list(self.span),
        }

    @classmethod
    def from_dict(cls, raw: Any, n_models: int) -> ContextCost:
        """The key as a file holds it, for ``n_models`` models; ``ValueError`` naming what is
        wrong."""
        if not isinstance(raw, dict):
            raise ValueError(f"context_cost must be a mapping, got {raw!r}")
        missing = {"tokens", "ar_tokens", "ar_slope", "slope", "span"} - set(raw)
        if missing:
            raise ValueError(f"context_cost is missing {', '.join(sorted(missing))}")
        slope, span = raw["slope"], raw["span"]
        if not isinstance(slope, list) or len(slope) != n_models:
            raise ValueError(
                f"context_cost.slope must hold one list per model ({n_models}), got {slope!r}"
            )
        if not isinstance(span, list) or len(span) != 2:
            raise ValueError(f"context_cost.span must be [low, high], got {span!r}")
        rows = tuple(
            validate.real_array(f"context_cost.slope[{i}] (model {i})", row).reshape(-1)
            for i, row in enumerate(slope)
        )
        return cls(raw["tokens"], raw["ar_tokens"], raw["ar_slope"], rows, (span[0], span[1]))
