"""What one pass costs, read from a model set's cost table as the contract prices it.

A pass of model ``i`` over ``m`` positions costs ``c_i(m)``: the measured curve's point
``cost_curve[i][m − 1]`` for ``m <= M_i``; beyond it, the line through its last two points,
``c_i(M_i) + s_i·(m − M_i)`` with ``s_i = max(c_i(M_i) − c_i(M_i − 1), 0, h_i)`` (flat where
the line would fall, and at least the row cost ``h_i``; a one-point curve rises by ``h_i``).
An affine set's ``cost[i] + cost_per_token[i]·m`` is read as the one-point curve
``cost[i] + cost_per_token[i]`` rising by ``cost_per_token[i]``. A pass that returns
``rows`` logit rows of its ``m`` positions costs ``c_i(m) − h_i·(m − rows)`` (a catch-up
position returns none), and ``s_i`` less again when it returns one row of ``m >= 2`` (the
row step ``s_i``: the second row costs ``s_i + h_i``). The unit is ``c_0(1)``, one
autoregressive target token.

The rule is the contract's (:mod:`ewif.kernel.pass_cost` states it for ``ewif``); it is read
here from the table itself, so the witnesses that price passes share no code with the
evaluator they check.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet


class Prices:
    """The pass prices of a list of models (module docstring): ``table[i]`` the points
    ``c_i(1..M_i)``, ``slope[i]`` the rise beyond them, ``row_cost[i]`` the cost ``h_i`` of
    one logit row, ``row_step[i]`` the step ``s_i`` of the second (None: zeros)."""

    def __init__(
        self,
        table: Sequence[np.ndarray],
        slope: np.ndarray,
        row_cost: np.ndarray,
        row_step: object | None = None,
    ) -> None:
        self.table = tuple(np.asarray(y, dtype=float) for y in table)
        self.slope = np.asarray(slope, dtype=float)
        self.row_cost = np.asarray(row_cost, dtype=float)
        self.row_step = (
            np.zeros(len(self.table)) if row_step is None else np.asarray(row_step, dtype=float)
        )

    @classmethod
    def from_curves(
        cls, curves: Sequence[np.ndarray], row_cost: object | None, row_step: object | None = None
    ) -> Prices:
        """Measured curves ``curves[i] = c_i(1..M_i)``, row costs and row steps (None:
        zeros)."""
        table = [np.asarray(y, dtype=float) for y in curves]
        h = np.zeros(len(table)) if row_cost is None else np.asarray(row_cost, dtype=float)
        rise = [float(y[-1] - y[-2]) if y.size > 1 else 0.0 for y in table]
        return cls(table, np.maximum(np.maximum(rise, 0.0), h), h, row_step)

    @classmethod
    def of(cls, model_set: ModelSet, models: Sequence[int] | None = None) -> Prices:
        """The prices of the set's models ``models`` (indices, in that order; default all)."""
        ix = list(range(len(model_set.models))) if models is None else [int(i) for i in models]
        h = None if model_set.row_cost is None else np.asarray(model_set.row_cost)[ix]
        s = None if model_set.row_step is None else np.asarray(model_set.row_step)[ix]
        if model_set.cost_curve is not None:
            return cls.from_curves([model_set.cost_curve[i] for i in ix], h, s)
        cost = np.asarray(model_set.cost, dtype=float)[ix]
        per_token = np.asarray(model_set.cost_per_token, dtype=float)[ix]
        table = [np.array([c + per]) for c, per in zip(cost, per_token, strict=True)]
        return cls(table, per_token, np.zeros(len(ix)) if h is None else h, s)

    @property
    def unit(self) -> float:
        """``c_0(1)``: one autoregressive target token."""
        return float(self.table[0][0])

    def at(self, i: int, m: int | np.ndarray) -> np.ndarray:
        """``c_i(m)`` for positions ``m >= 1`` (an integer or an integer array)."""
        m = np.asarray(m)
        y = self.table[i]
        return y[np.minimum(m, y.size) - 1] + self.slope[i] * np.maximum(m - y.size, 0)

    def at_rows(self, i: int, m: int | np.ndarray, rows: int | np.ndarray) -> np.ndarray:
        """``c_i(m) − h_i·(m − rows) − s_i·[m >= 2 and rows = 1]``: a pass of ``m`` positions
        returning ``rows`` rows."""
        m, rows = np.asarray(m), np.asarray(rows)
        out = self.at(i, m) - self.row_cost[i] * (m - rows)
        if self.row_step[i]:
            out = out - self.row_step[i] * ((m >= 2) & (rows == 1))
        return out
