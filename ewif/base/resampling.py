"""The bootstrap's draws, one definition for every interval of the project.

The exact EWIF's prediction intervals (:mod:`ewif.predict.bootstrap`) and the trace replay's
(:mod:`simulate.trace_replay`) resample the same evidence the same way, so that their
intervals mean the same thing; the draws are stated here, below both (their mathematics and
sources: the docstring of :mod:`ewif.predict.bootstrap`):

* **prompts**: whole measuring prompts drawn with replacement, and for a prediction on ``H``
  held-out prompts ``H`` more drawn from those (:func:`prompt_draw`), the prompts of a
  held-out category the measuring prompts never saw drawn together from one stand-in
  category (:class:`HeldOut`); a replicate's deviation is widened by Hesterberg's factor
  ``√(P/(P−1))·t_{P−1}/z`` (:func:`expansion`);
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class HeldOut:
    """A run's held-out prompts by category: ``measuring[i]`` the category of measuring
    prompt ``i`` (bootstrap row ``i``), ``held_out`` one category per held-out prompt.

    A held-out prompt of a category the measuring prompts include is drawn as a plain
    held-out prompt is. A category the measuring prompts never saw (:attr:`unseen`) is a
    category of unknown acceptance: its prompts share it, so they are drawn together, from
    one **stand-in category** picked uniformly among the categories of the replicate's
    measuring prompts — the two-stage resample at the level of categories (the unseen
    category a draw from the population the measured ones are; :func:`prompt_draw`).
    """

    measuring: tuple[str, ...]
    held_out: tuple[str, ...]

    def __post_init__(self) -> None:
        for name, kinds in (("measuring", self.measuring), ("held_out", self.held_out)):
            if not kinds or not all(isinstance(k, str) for k in kinds):
                raise ValueError(
                    f"HeldOut.{name} must name one category per prompt, got {validate.shown(kinds)}"
                )

    @property
    def prompts(self) -> int:
        return len(self.held_out)

    @property
    def unseen(self) -> dict[str, int]:
        """Held-out categories absent from the measuring prompts: how many prompts each."""
        known = set(self.measuring)
        return dict(Counter(k for k in self.held_out if k not in known))


def held_out_spec(held_out: int | HeldOut | None, prompts: int) -> int | HeldOut | None:
    """``held_out`` checked against a set measured on ``prompts`` prompts: None, a count
    (>= 1) or a :class:`HeldOut` naming one category per measuring prompt."""
    if held_out is None or isinstance(held_out, HeldOut):
        if held_out is not None and len(held_out.measuring) != prompts:
            raise ValueError(
                f"HeldOut names {len(held_out.measuring)} measuring categories for a set "
                f"measured on {prompts} prompts"
            )
        return held_out
    return validate.count("held_out_prompts", held_out, minimum=1)


def prompt_draw(
    rng: np.random.Generator, prompts: int, held_out: int | HeldOut | None
) -> np.ndarray:
    """The prompts of one replicate: ``I``, ``prompts`` indices drawn with replacement, or
    with ``held_out`` (checked by :func:`held_out_spec`) ``J``, the pseudo held-out prompts
    of the two-stage resample (:mod:`ewif.predict.bootstrap`): a count's prompts drawn from
    ``I``; a :class:`HeldOut`'s prompts of measured categories drawn so too, then each unseen
    category's ``h`` prompts drawn from ``I``'s prompts of one stand-in category (uniform
    among the categories in ``I``). Without unseen categories the draw is the count's,
    number for number."""
    idx = rng.integers(0, prompts, prompts)
    if held_out is None:
        return idx
    if not isinstance(held_out, HeldOut):
        return idx[rng.integers(0, prompts, held_out)]
    unseen = held_out.unseen
    parts = [idx[rng.integers(0, prompts, held_out.prompts - sum(unseen.values()))]]
    kinds = np.asarray(held_out.measuring)[idx]
    present = sorted(set(kinds))
    for h in unseen.values():
        pool = idx[kinds == present[rng.integers(len(present))]]
        parts.append(pool[rng.integers(0, pool.size, h)])
    return np.concatenate(parts)


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
