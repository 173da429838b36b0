"""Measured batched pass costs ``c_i(B, m)``: a model set's ``batch_cost_curve`` and
``batch_reevaluate_curve`` (``csd.models/4`` and later), priced by :mod:`ewif.predict.batch`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ewif.base import validate


@dataclass(frozen=True)
class BatchCosts:
    """Measured batched pass costs: ``curves[B][i][m − 1]`` is the cost of one pass of model
    ``i`` over ``B`` rows of ``m`` positions each, in the model set's unit (one
    autoregressive token at batch 1), with the logit rows a run asks of such a pass (the
    target's: all ``m`` per row; a drafter's: one per row for ``m <= 2``, its generating and
    catch-up passes). ``reevaluate[B][i]`` (optional, drafters) is the same pass with **one**
    logit row in all — llama.cpp's server re-evaluating the target's batch on the drafter.
    Beyond the last measured ``m`` a curve continues on the line through its last two points
    (never downwards), as :mod:`ewif.kernel.pass_cost`; a fractional ``m`` (a batch whose rows feed
    different sizes) reads the curve linearly between its neighbours; a ``B`` between two
    measured sizes reads both linearly in ``B``, and one beyond the largest continues their
    line (never downwards)."""

    curves: dict[int, tuple[np.ndarray, ...]]
    reevaluate: dict[int, tuple[np.ndarray, ...]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "curves", _tables("batch_cost_curve", self.curves))
        if self.reevaluate is not None:
            again = _tables("batch_reevaluate_curve", self.reevaluate)
            if {len(t) for t in again.values()} != {self.n_models}:
                raise ValueError(
                    f"batch_reevaluate_curve must hold one curve per model ({self.n_models}) "
                    "at every batch size"
                )
            object.__setattr__(self, "reevaluate", again)

    @property
    def n_models(self) -> int:
        return len(next(iter(self.curves.values())))

    def at(self, i: int, rows: int, m: float, one_output: bool = False) -> float:
        """``c_i(B = rows, m)`` (class docstring); ``one_output`` reads the re-evaluation
        curves (the ordinary ones where none were measured)."""
        table = self.reevaluate if one_output and self.reevaluate is not None else self.curves
        sizes = list(table)
        if rows in table:
            return _read(table[rows][i], m)
        lo = max((b for b in sizes if b < rows), default=None)
        hi = min((b for b in sizes if b > rows), default=None)
        if lo is None:  # below the smallest measured B: its value (never cheaper per pass)
            return _read(table[sizes[0]][i], m)
        if hi is None:
            if len(sizes) == 1:
                return _read(table[lo][i], m)
            lo, hi = sizes[-2], sizes[-1]
            y0, y1 = _read(table[lo][i], m), _read(table[hi][i], m)
            return y1 + max(y1 - y0, 0.0) * (rows - hi) / (hi - lo)
        y0, y1 = _read(table[lo][i], m), _read(table[hi][i], m)
        return y0 + (y1 - y0) * (rows - lo) / (hi - lo)

    def to_dict(self) -> dict[str, list[list[float]]]:
        """The ``batch_cost_curve`` mapping of a model-set file."""
        return _tables_out(self.curves)

    def reevaluate_dict(self) -> dict[str, list[list[float]]] | None:
        """The ``batch_reevaluate_curve`` mapping (None when not measured)."""
        return None if self.reevaluate is None else _tables_out(self.reevaluate)

    @classmethod
    def from_dict(cls, data: Any, reevaluate: Any = None) -> BatchCosts:
        """From a file's ``batch_cost_curve`` (and ``batch_reevaluate_curve``) mappings."""
        return cls(
            _tables_in("batch_cost_curve", data),
            None if reevaluate is None else _tables_in("batch_reevaluate_curve", reevaluate),
        )


def _tables(name: str, per_size: Any) -> dict[int, tuple[np.ndarray, ...]]:
    """Checked ``{B: one curve per model}``, sorted by ``B``."""
    if not per_size:
        raise ValueError(f"{name} must hold at least one batch size")
    clean = {}
    for b, per_model in per_size.items():
        rows = validate.count(f"{name} batch size", b, minimum=1)
        where = f"{name}[{rows}]"
        if isinstance(per_model, str | bytes) or not isinstance(per_model, Sequence):
            raise ValueError(f"{where} must be a list with one curve per model")
        tables = tuple(validate.costs(f"{where}[{i}]", c) for i, c in enumerate(per_model))
        if any(t.ndim != 1 or t.size == 0 for t in tables):
            raise ValueError(f"{where} must hold one non-empty list of costs per model")
        clean[rows] = tables
    if len({len(t) for t in clean.values()}) != 1:
        raise ValueError(
            f"{name} must hold the same number of models at every batch size, got "
            f"{sorted({len(t) for t in clean.values()})}"
        )
    return dict(sorted(clean.items()))


def _tables_in(name: str, data: Any) -> dict[int, tuple[np.ndarray, ...]]:
    """A file's ``{B: one curve per model}`` mapping, keys read as batch sizes."""
    tables = validate.keyed(name, data, int, "a batch size (an integer >= 1)", "cost curves")
    return {b: tuple(np.asarray(c, dtype=float) for c in per) for b, per in tables.items()}


def _tables_out(tables: dict[int, tuple[np.ndarray, ...]]) -> dict[str, list[list[float]]]:
    return {str(b): [c.tolist() for c in per] for b, per in tables.items()}


def _read(curve: np.ndarray, m: float) -> float:
    """A curve at a real ``m >= 1``: linear between points, the last two points' line
    (never downwards) beyond the last."""
    m = float(m)
    if not m >= 1.0:
        raise ValueError(f"m must be >= 1 (positions of a pass), got {m!r}")
    size = curve.size
    if m <= size:
        return float(np.interp(m, np.arange(1, size + 1), curve))
    slope = max(float(curve[-1] - curve[-2]), 0.0) if size > 1 else 0.0
    return float(curve[-1]) + slope * (m - size)
