"""The cost of one forward pass of each model as a function of the positions ``m`` it processes.

A generating (leaf) pass processes ``m = 1`` position; a review pass over a draft of ``D``
tokens processes ``m = D + 1``. Model ``i``'s pass costs ``c_i(m)`` (in units of one
target pass at ``m = 1`` when ``c_0(1) = 1``), given in one of two forms:

* **affine** (the special case): ``c_i(m) = cost[i] + cost_per_token[i]·m``;
* **measured curve**: ``c_i(m) = cost_curve[i][m − 1]`` for ``m = 1..M_i`` (curves may have
  different lengths ``M_i``). **Extrapolation rule:** beyond ``M_i`` the curve continues
  on the line through its last two points, ``c_i(m) = y_M + s·(m − M)`` with
  ``s = max(y_M − y_(M−1), h_i)`` (``h_i`` the row cost below, 0 by default): if that line
  would decrease it stays flat at the last value (a pass never gets cheaper beyond the
  measured range), and a position beyond it costs at least its logit row; a one-point curve
  extends with slope ``h_i``.

Both forms are stored alike: a table ``c_i(1..M_i)`` and the slope beyond it (an affine
cost is the one-point table ``cost + cost_per_token`` with slope ``cost_per_token``).
The unit of EWIF is ``c_0(1)``, the cost of one autoregressive target token.

**Logit rows.** ``c_i(m)`` prices a pass that returns the logits of all ``m`` positions. A
KV-cached drafter's catch-up positions (:mod:`ewif.kernel.catch_up`) return none: a pass of ``m``
positions that returns ``r`` rows costs ``c_i(m) − h_i·(m − r)`` (:meth:`PassCost.at_rows`),
with ``h_i = row_cost[i]`` the cost of one row of the LM head (0, the default, prices every
pass at all its rows). An affine cost needs ``h_i <= cost_per_token[i]`` (a position costs at
least its row); a curve needs ``h_i <= min_{2 <= m <= M} c_i(m)/(m − 1)``
(:func:`~ewif.base.row_cost.max_row_cost`: no one-row pass costs less than nothing; beyond
``M`` the slope is at least ``h_i``, so it holds there too). ``r`` is the paper's ``m`` of
the pass (1 for a generating pass, ``D + 1`` for a review), so a pass's rows never depend
on how much it catches up.

**Row step.** On some engines (llama.cpp on CPU) the rows' cost is a step, not a line: the
second row costs ``s_i + h_i``, each further row ``h_i`` (``s_i = row_step[i]``, 0 by
default: the line above, exactly). With ``ρ_i(1) = 0`` and ``ρ_i(r) = s_i + h_i·(r − 1)``
for ``r >= 2``, a pass of ``m`` positions returning ``r`` rows costs

    c_i(m) − (ρ_i(m) − ρ_i(r)) = c_i(m) − h_i·(m − r) − s_i·[m >= 2 and r = 1].

The step needs ``s_i <= min_{m >= 2} (c_i(m) − h_i·(m − 1))`` (no one-row pass priced below
zero; :func:`~ewif.base.row_cost.max_row_step` for a curve, ``c_i(2) − h_i`` affine; beyond
the measured range ``c_i(m) − h_i·(m − 1)`` never decreases, so it holds there too).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from ewif.base import validate
from ewif.base.row_cost import max_row_cost, max_row_step

_AFFINE_RTOL = 1e-12


class PassCost:
    """Pass costs ``c_i(m)`` of models ``0..n`` (target first); see the module docstring.

    Build with :meth:`affine` or :meth:`from_curves`; instances are immutable.
    """

    def __init__(
        self,
        table: tuple[np.ndarray, ...],
        slope: np.ndarray,
        curves: bool,
        row_cost: object | None = None,
        row_step: object | None = None,
    ) -> None:
        self._table = table
        self._slope = slope
        self._curves = curves
        self._rows = _row_cost(row_cost, len(table))
        self._step = _row_cost(row_step, len(table), "row_step")
        for i, si in enumerate(self._step):
            if si > 0 and si > (limit := self._max_step(i)):
                raise ValueError(
                    f"row_step[{i}] = {si:g} would price model {i}'s one-row pass below zero "
                    f"(c(m) − s − h·(m − 1) < 0 for some m >= 2); it must be at most {limit:g}"
                )
        for arr in (*table, slope, self._rows, self._step):
            arr.setflags(write=False)

    def _max_step(self, i: int) -> float:
        """``min_{m >= 2} (c_i(m) − h_i·(m − 1))`` (module docstring, "Row step"):
        :func:`~ewif.base.row_cost.max_row_step` of the priced curve to ``max(M_i, 2)``."""
        curve = self.at(i, np.arange(1, max(self._table[i].size, 2) + 1))
        return max_row_step(curve, float(self._rows[i]))

    # ------------------------------------------------------------------ construction
    @classmethod
    def affine(
        cls,
        cost: object,
        cost_per_token: object | None = None,
        row_cost: object | None = None,
        row_step: object | None = None,
    ) -> PassCost:
        """``c_i(m) = cost[i] + cost_per_token[i]·m`` (both checked by :func:`relative_costs`);
        ``row_cost`` and ``row_step`` as in :meth:`from_curves`."""
        c, s = relative_costs(cost, cost_per_token)
        h = _row_cost(row_cost, c.size)
        for i in np.flatnonzero(h > s):
            raise ValueError(
                f"row_cost[{i}] = {h[i]:g} exceeds cost_per_token[{i}] = {s[i]:g}: a position "
                f"costs at least its logit row"
            )
        table = tuple(np.array([ci + si]) for ci, si in zip(c, s, strict=True))
        return cls(table, s.astype(float), curves=False, row_cost=h, row_step=row_step)

    @classmethod
    def from_curves(
        cls,
        cost_curve: object,
        n_models: int | None = None,
        row_cost: object | None = None,
        row_step: object | None = None,
    ) -> PassCost:
        """``c_i(m) = cost_curve[i][m − 1]``, extended by the documented rule.

        ``cost_curve`` must be a list of ``n_models`` (when given; at least 2) non-empty
        sequences of finite numbers >= 0, and ``cost_curve[0][0]`` must be 1 (the target's
        generating pass is the unit). ``row_cost`` (default zeros): one finite number >= 0
        per model, the cost of one logit row; ``row_step`` (default zeros): one finite number
        >= 0 per model, the extra cost of a pass's second row (module docstring, "Row step"),
        at most :func:`~ewif.base.row_cost.max_row_step`. Anything else raises
        ``ValueError`` naming the model index and the value.
        """
        if isinstance(cost_curve, str | bytes) or not isinstance(cost_curve, Sequence | np.ndarray):
            raise ValueError(
                f"cost_curve must be a list with one curve (a list of costs for m = 1, 2, ...) "
                f"per model, got {cost_curve!r}"
            )
        curves = list(cost_curve)
        if n_models is not None and len(curves) != n_models:
            raise ValueError(
                f"cost_curve must hold one curve per model ({n_models}), got {len(curves)}"
            )
        if len(curves) < 2:
            raise ValueError(
                f"cost_curve must hold curves for the target and at least one drafter, got "
                f"{len(curves)}"
            )
        table = tuple(_curve(i, y) for i, y in enumerate(curves))
        if table[0][0] != 1.0:
            raise ValueError(
                f"cost_curve[0][0] (the target's generating pass, m = 1) must be 1, got "
                f"{float(table[0][0]):g}"
            )
        h = _row_cost(row_cost, len(table))
        for i, (y, hi) in enumerate(zip(table, h, strict=True)):
            if hi > (limit := max_row_cost(y)):
                m = 2 + int(np.argmin(y[1:] / np.arange(1, y.size)))
                raise ValueError(
                    f"row_cost[{i}] = {hi:g} would price model {i}'s one-row pass over m = {m} "
                    f"positions below zero (c({m}) = {y[m - 1]:g} < h·(m − 1)); it must be at "
                    f"most {limit:g}"
                )
        last = [float(y[-1] - y[-2]) if y.size > 1 else 0.0 for y in table]
        slope = np.maximum(np.maximum(last, 0.0), h)
        return cls(table, slope, curves=True, row_cost=h, row_step=row_step)

    def m1_costs(self, cost: object | None = None) -> np.ndarray:
        """``c_i(1)`` of every model (a generating pass); ``cost``, when given, must equal
        them (``ValueError`` otherwise) — the ``cost`` that goes with measured curves."""
        m1 = np.array([y[0] for y in self._table])
        if cost is not None:
            given = validate.costs("cost", cost)
            if given.shape != m1.shape or not np.array_equal(given, m1):
                raise ValueError(
                    f"cost must equal the m = 1 values {m1.tolist()} of cost_curve (or be "
                    f"omitted with cost_curve), got {given.tolist()}"
                )
        return m1

    # ------------------------------------------------------------------ queries
    @property
    def n_models(self) -> int:
        """Number of models ``n + 1``."""
        return len(self._table)

    @property
    def kind(self) -> str:
        """``"curve"`` when built from measured curves, else ``"affine"``."""
        return "curve" if self._curves else "affine"

    @property
    def unit(self) -> float:
        """``c_0(1)``: the cost of one autoregressive target token (the unit of EWIF)."""
        return float(self._table[0][0])

    @property
    def row_cost(self) -> np.ndarray:
        """``h_i``: the cost of one logit row of each model (read-only; module docstring)."""
        return self._rows

    @property
    def row_step(self) -> np.ndarray:
        """``s_i``: the extra cost of each model's second logit row (read-only; module
        docstring, "Row step"; zeros unless given)."""
        return self._step

    def table(self, i: int) -> np.ndarray:
        """The stored values ``c_i(1..M_i)`` (read-only)."""
        return self._table[i]

    def at(self, i: int, m: int | np.ndarray) -> np.ndarray:
        """``c_i(m)`` for positions ``m >= 1`` (any integer array shape; 0-d for a scalar)."""
        m = np.asarray(m)
        if m.dtype.kind not in "iu":
            m = validate.counts("m", m, minimum=1)
        elif m.size and m.min() < 1:
            raise ValueError(f"m must hold integers >= 1 (positions of a pass), got {m.min()}")
        y = self._table[i]
        inside = y[np.minimum(m, y.size) - 1]
        return inside + self._slope[i] * np.maximum(m - y.size, 0)

    def at_rows(self, i: int, m: int | np.ndarray, rows: int | np.ndarray) -> np.ndarray:
        """``c_i(m) − h_i·(m − rows) − s_i·[m >= 2 and rows = 1]``: a pass of ``m`` positions
        returning ``rows`` logit rows (``1 <= rows <= m``; module docstring, "Row step")."""
        m, rows = np.asarray(m), np.asarray(rows)
        if rows.dtype.kind not in "iu" or (rows.size and rows.min() < 1):
            raise ValueError(f"rows must hold integers >= 1 (logit rows of a pass), got {rows!r}")
        if np.any(rows > m):
            raise ValueError(
                f"rows must be at most m (a pass returns a row per position), "
                f"got rows {rows!r} for m {m!r}"
            )
        out = self.at(i, m) - self._rows[i] * (m - rows)
        if self._step[i]:
            out = out - self._step[i] * ((m >= 2) & (rows == 1))
        return out

    def expected(self, i: int, m_pmf: np.ndarray) -> float:
        """``E[c_i(m)] = Σ_m m_pmf[m]·c_i(m)`` for ``m_pmf[m] = P(m)`` (index = m).

        ``m_pmf[0]`` must be 0 (no pass processes zero positions). Linear in ``m_pmf``, so
        a measure (expected pass counts by ``m``) gives the expected total cost.
        """
        m_pmf = np.asarray(m_pmf, dtype=float)
        if m_pmf.size and m_pmf[0] != 0.0:
            raise ValueError(f"m_pmf[0] = P(m = 0) must be 0, got {m_pmf[0]!r}")
        if m_pmf.size < 2:
            return 0.0
        return float(m_pmf[1:] @ self.at(i, np.arange(1, m_pmf.size)))

    def affine_params(self, i: int) -> tuple[float, float] | None:
        """``(a, b)`` with ``c_i(m) = a + b·m`` for every ``m >= 1``, or None if not affine.

        A curve counts as affine when its consecutive differences agree to 1e-12 relative
        to its largest value and the extension continues the line (it never goes flat
        after a decrease).
        """
        y, s = self._table[i], float(self._slope[i])
        if y.size == 1:
            return float(y[0]) - s, s
        d = np.diff(y)
        tol = _AFFINE_RTOL * float(np.abs(y).max())
        if d[-1] < 0 or np.abs(d - d[-1]).max() > tol:
            return None
        return float(y[0]) - s, s

    def is_affine(self, i: int) -> bool:
        """True when ``c_i`` is affine in ``m`` (see :meth:`affine_params`)."""
        return self.affine_params(i) is not None

    def select(self, index: Sequence[int] | np.ndarray) -> PassCost:
        """The pass costs of the models ``index`` (in that order)."""
        ix = [int(i) for i in index]
        return PassCost(
            tuple(self._table[i].copy() for i in ix),
            self._slope[ix].copy(),
            self._curves,
            self._rows[ix].copy(),
            self._step[ix].copy(),
        )

    def __repr__(self) -> str:
        return f"PassCost({self.kind}, M={[y.size for y in self._table]})"


def relative_costs(
    cost: object, cost_per_token: object | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(cost, cost_per_token)`` of the affine form, checked: ``cost`` a 1-D array with one
    finite entry >= 0 per model (the target and at least one drafter), the target's
    ``cost[0] = 1``; ``cost_per_token`` (default zeros) finite >= 0, of the same shape."""
    c = validate.costs("cost", cost)
    if c.ndim != 1 or c.size < 2:
        raise ValueError(
            f"cost must be a 1-D array with one entry per model (target + at least one "
            f"drafter), got shape {c.shape}"
        )
    if c[0] != 1.0:
        raise ValueError(f"cost[0] (the target's pass) must be 1, got {validate.shown(c[0])}")
    s = (
        np.zeros(c.size)
        if cost_per_token is None
        else validate.costs("cost_per_token", cost_per_token)
    )
    if s.shape != c.shape:
        raise ValueError(f"cost_per_token must have shape {c.shape}, got {s.shape}")
    return c, s


def _row_cost(row_cost: object | None, n_models: int, name: str = "row_cost") -> np.ndarray:
    """``row_cost`` (or ``row_step``, by ``name``) checked: None (zeros) or one finite number
    >= 0 per model."""
    if row_cost is None:
        return np.zeros(n_models)
    h = validate.costs(name, row_cost)
    if h.shape != (n_models,):
        raise ValueError(f"{name} must hold one cost per model ({n_models}), got shape {h.shape}")
    return h.astype(float)


def _curve(i: int, values: object) -> np.ndarray:
    """One model's curve as a float array; ValueError naming model ``i`` and the value."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | np.ndarray):
        raise ValueError(
            f"cost_curve[{i}] (model {i}) must be a list of costs for m = 1, 2, ..., got {values!r}"
        )
    out = []
    for m, v in enumerate(values, start=1):
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"cost_curve[{i}] (model {i}) must hold numbers, got {v!r} at m = {m}")
        x = float(v)
        if not math.isfinite(x) or x < 0:
            raise ValueError(
                f"cost_curve[{i}] (model {i}) must hold finite numbers >= 0, got {v!r} at m = {m}"
            )
        out.append(x)
    if not out:
        raise ValueError(f"cost_curve[{i}] (model {i}) is empty: it needs at least c(m = 1)")
    return np.asarray(out)
