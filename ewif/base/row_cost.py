"""The most a logit row may cost against a measured pass-cost curve.

A pass of ``m`` positions that returns one logit row costs ``c(m) − h·(m − 1)``
(:mod:`ewif.kernel.pass_cost`); a row cost ``h`` above ``min_{2 <= m <= M} c(m)/(m − 1)``
would price such a pass below zero. The bound is a fact about the curve alone, so the price
list (:class:`ewif.kernel.pass_cost.PassCost`), the bootstrap's draws
(:mod:`ewif.base.resampling`) and the measurement (:mod:`realrun.measure`) read it here.
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
