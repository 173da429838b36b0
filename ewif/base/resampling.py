"""The bootstrap's draws, one definition for every interval of the project.

The exact EWIF's prediction intervals (:mod:`ewif.predict.bootstrap`) and the trace replay's
(:mod:`simulate.trace_replay`) resample the same evidence the same way, so that their
intervals mean the same thing; the draws are stated here, below both (their mathematics and
sources: the docstring of :mod:`ewif.predict.bootstrap`):

* **prompts**: whole measuring prompts drawn with replacement, and for a prediction on ``H``
  held-out prompts ``H`` more drawn from those (:func:`prompt_draw`); a replicate's
  deviation is widened by Hesterberg's factor ``√(P/(P−1))·t_{P−1}/z`` (:func:`expansion`);
* **costs**: every cost curve drawn as ``c_i·exp(z_i·se_i/c_i)`` with one standard normal per
  model, the unit ``c_0(1)`` with one of its own, the curves then renormalised to the drawn
  unit (:func:`drawn_curves`); the row costs scaled with their curves
  (:func:`drawn_row_cost`), never above what a curve admits
  (:func:`ewif.base.row_cost.max_row_cost`); the row steps alike (:func:`drawn_row_step`,
  :func:`ewif.base.row_cost.max_row_step`).

A draw is resampling, not evaluation: what a witness checks (the step law, the feeds, the
costs a run pays) is computed elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

from ewif.base import validate
from ewif.base.row_cost import max_row_cost, max_row_step

#: Replicates and interval level used when a caller does not say.
REPLICATES = 200
LEVEL = 0.9


def expansion(prompts: int, level: float = LEVEL) -> float:
    """``√(P/(P−1))·t_{P−1,q}/z_q`` with ``q = (1 + level)/2`` (:mod:`ewif.predict.bootstrap`); the
    Student quantile by its Cornish–Fisher expansion in ``1/ν`` (error below 1e-3 for
    ``ν >= 3``; exact enough for an interval's width)."""
    p = validate.count("prompts", prompts, minimum=2)
    if not 0.0 < validate.probability("level", level) < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    z = NormalDist().inv_cdf((1 + level) / 2)
    nu = p - 1
    t = (
        z
        + (z**3 + z) / (4 * nu)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * nu**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * nu**3)
    )
    return math.sqrt(p / (p - 1)) * t / z


def prompt_draw(rng: np.random.Generator, prompts: int, held_out_prompts: int | None) -> np.ndarray:
    """The prompts of one replicate: ``I``, ``prompts`` indices drawn with replacement, or
    with ``held_out_prompts`` (a validated count) ``J``, that many drawn from ``I`` — the
    pseudo held-out prompts of the two-stage resample (:mod:`ewif.predict.bootstrap`)."""
    idx = rng.integers(0, prompts, prompts)
    if held_out_prompts is not None:
        idx = idx[rng.integers(0, prompts, held_out_prompts)]
    return idx


def drawn_row_cost(
    row_cost: Sequence[float], curves: Sequence[np.ndarray], drawn: Sequence[np.ndarray]
) -> np.ndarray:
    """The row costs ``row_cost`` of the measured ``curves`` once the curves are drawn as
    ``drawn``: each ``h_i`` scaled as its curve's two-position pass (what it was timed
    against), at most what the drawn curve admits
    (:func:`~ewif.base.row_cost.max_row_cost`)."""
    out = np.zeros(len(drawn))
    for i, (h, base, moved) in enumerate(zip(row_cost, curves, drawn, strict=True)):
        if h and base.size > 1:
            out[i] = min(h * _two_position_scale(base, moved), max_row_cost(moved))
    return out


def drawn_row_step(
    row_step: Sequence[float],
    row_cost: Sequence[float] | None,
    curves: Sequence[np.ndarray],
    drawn: Sequence[np.ndarray],
) -> np.ndarray:
    """The row steps ``row_step`` of the measured ``curves`` once the curves are drawn as
    ``drawn`` and the row costs as ``row_cost`` (drawn too; None: zeros): each ``s_i``
    scaled as :func:`drawn_row_cost` scales ``h_i``, at most what the drawn curve admits
    with the drawn row cost (:func:`~ewif.base.row_cost.max_row_step`)."""
    rows = np.zeros(len(drawn)) if row_cost is None else np.asarray(row_cost, dtype=float)
    out = np.zeros(len(drawn))
    pairs = zip(row_step, curves, drawn, rows, strict=True)
    for i, (s, base, moved, h) in enumerate(pairs):
        if s and base.size > 1:
            out[i] = max(min(s * _two_position_scale(base, moved), max_row_step(moved, h)), 0.0)
    return out


def _two_position_scale(base: np.ndarray, moved: np.ndarray) -> float:
    """How a drawn curve ``moved`` scales the measured ``base``'s two-position pass (what a
    row was timed against; 1 where that pass costs nothing)."""
    return moved[1] / base[1] if base[1] > 0 else 1.0


def drawn_curves(
    curves: Sequence[np.ndarray], stderr: Sequence[np.ndarray], rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """One draw of every model's cost curve (module docstring): ``c_i·exp(z_i·se_i/c_i)``
    with one standard normal per model, the unit ``c_0(1)`` with a normal of its own, then
    every curve in units of the drawn unit."""
    z = rng.standard_normal(len(curves))
    drawn = [_drawn(c, s, zi) for c, s, zi in zip(curves, stderr, z, strict=True)]
    unit = drawn[0][0] = _drawn(curves[0][:1], stderr[0][:1], rng.standard_normal())[0]
    return tuple(c / unit for c in drawn)


def _drawn(curve: np.ndarray, stderr: np.ndarray, z: float) -> np.ndarray:
    """``c·exp(z·se/c)`` point by point, 0 where ``c = 0`` (:mod:`ewif.predict.bootstrap`)."""
    c = np.asarray(curve, dtype=float)
    ratio = np.divide(stderr, c, out=np.zeros_like(c), where=c > 0)
    return c * np.exp(z * ratio)
