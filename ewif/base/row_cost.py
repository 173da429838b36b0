"""The most a logit row (and the row step) may cost against a measured pass-cost curve.

A pass of ``m`` positions that returns one logit row costs ``c(m) − h·(m − 1)``
(:mod:`ewif.kernel.pass_cost`); a row cost ``h`` above ``min_{2 <= m <= M} c(m)/(m − 1)``
would price such a pass below zero. The bound is a fact about the curve alone, so the price
list (:class:`ewif.kernel.pass_cost.PassCost`), the bootstrap's draws
(:mod:`ewif.base.resampling`) and the measurement (:mod:`realrun.measure`) read it here;
likewise the most a row step ``s`` may cost (:func:`max_row_step`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def max_row_cost(curve: Sequence[float] | np.ndarray) -> float:
    """The largest row cost a curve ``c(1..M)`` admits, ``min_{2 <= m <= M} c(m)/(m − 1)``
    (module docstring; ``inf`` for a one-point curve)."""
    y = np.asarray(curve, dtype=float)
    return float((y[1:] / np.arange(1, y.size)).min()) if y.size > 1 else math.inf


def max_row_step(curve: Sequence[float] | np.ndarray, row_cost: float = 0.0) -> float:
    """The largest row step ``s`` a curve ``c(1..M)`` with row cost ``h = row_cost`` admits,
    ``min_{m >= 2} (c(m) − h·(m − 1))``: a one-row pass over ``m >= 2`` positions costs
    ``c(m) − s − h·(m − 1)`` (:mod:`ewif.kernel.pass_cost`, "Row step"), never below 0.
    Beyond ``M`` the curve rises by at least ``h`` per position, so the minimum is over
    ``2 <= m <= max(M, 2)``; a one-point curve rises by ``h``, so it admits ``c(1)``."""
    y = np.asarray(curve, dtype=float)
    if y.size == 1:  # c(2) − h, in the price list's own arithmetic (equal to c(1) unrounded)
        return float((y[0] + row_cost) - row_cost)
    return float((y[1:] - row_cost * np.arange(1, y.size)).min())
