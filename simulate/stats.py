"""Interval estimates and goodness-of-fit tests used by the Monte Carlo layer.

* :func:`mean_estimate` — the sample mean with the normal (CLT) interval
  ``x̄ ± z·s/√N``.
* :func:`ratio_estimate` — the renewal-reward ratio ``R = ΣT / ΣC`` (EWIF) with a
  **delta-method** interval: for i.i.d. pairs ``(T_i, C_i)``,
  ``√N (R̂ − R) → N(0, Var(T − R C) / E[C]²)``, so
  ``se(R̂) = sqrt(Var(T − R̂ C) / N) / C̄``.
* :func:`batch_ratio_estimate` — the same ratio when steps are *dependent* (Markov
  acceptance): the delta method applied to independent batch totals (batch means).
* :func:`wilson_interval` — the Wilson score interval for a binomial proportion.
* :func:`chi_square_gof` — Pearson's χ² goodness-of-fit test of observed counts against
  exact probabilities, pooling adjacent cells until every expected count is ≥ 5.

All intervals are two-sided at the stated ``level`` with the normal quantile
``z = Φ⁻¹((1 + level)/2)`` (z = 3.2905 at level 0.999).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import special as _special

from ewif.base import validate


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its standard error and a two-sided interval at ``level``."""

    value: float
    se: float
    low: float
    high: float
    level: float

    def contains(self, x: float) -> bool:
        """``low ≤ x ≤ high``, widened by 1e-12 relative for floating-point rounding."""
        tol = 1e-12 * max(1.0, abs(x))
        return bool(self.low - tol <= x <= self.high + tol)

    def z(self, exact: float) -> float:
        """``(value − exact)/se``; 0 when both agree exactly, ±inf for se = 0 otherwise."""
        return z_score(self.value, exact, self.se)

    def to_dict(self) -> dict[str, float]:
        """The fields by name."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ChiSquare:
    """Result of :func:`chi_square_gof`: Pearson's statistic on ``dof`` degrees of freedom."""

    statistic: float
    dof: int
    p_value: float
    cells: int
    samples: int

    @property
    def z(self) -> float:
        """The p-value as a one-sided normal score ``Φ⁻¹(1 − p)`` (large = misfit)."""
        if self.p_value <= 0.0:
            return math.inf
        return float(-_special.ndtri(self.p_value))

    def rejects(self, level: float) -> bool:
        """True when the fit is rejected at significance ``1 − level``."""
        return self.p_value < 1.0 - level

    def to_dict(self) -> dict[str, float | int]:
        return {
            "statistic": self.statistic,
            "dof": self.dof,
            "p_value": self.p_value,
            "z": self.z,
            "cells": self.cells,
            "samples": self.samples,
        }


def normal_quantile(level: float) -> float:
    """``z`` with ``P(|N(0,1)| ≤ z) = level``; ``level`` in (0, 1)."""
    level = validate.probability("level", level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level!r}")
    return float(-_special.ndtri((1.0 - level) / 2.0))


def z_score(value: float, exact: float, se: float) -> float:
    """``(value − exact)/se`` with the degenerate case ``se = 0`` made explicit."""
    diff = value - exact
    if se > 0.0:
        return float(diff / se)
    if abs(diff) <= 1e-12 * max(1.0, abs(exact)):
        return 0.0
    return math.copysign(math.inf, diff)


def mean_estimate(total: float, total_sq: float, n: int, level: float = 0.999) -> Estimate:
    """Sample mean of ``n`` i.i.d. values from their sum and sum of squares."""
    n = validate.count("n", n, minimum=1)
    z = normal_quantile(level)
    mean = total / n
    var = max(total_sq / n - mean * mean, 0.0) * n / max(n - 1, 1)
    se = math.sqrt(var / n)
    return Estimate(float(mean), se, float(mean - z * se), float(mean + z * se), level)


def ratio_estimate(
    sum_x: float,
    sum_y: float,
    sum_xx: float,
    sum_yy: float,
    sum_xy: float,
    n: int,
    level: float = 0.999,
) -> Estimate:
    """``R̂ = Σx / Σy`` for ``n`` i.i.d. pairs, delta-method interval.

    ``Var(x − R y) = Var x − 2R Cov(x, y) + R² Var y`` is formed from the sums, and
    ``se(R̂) = sqrt(Var(x − R̂ y)/n) / ȳ``.
    """
    n = validate.count("n", n, minimum=1)
    if sum_y <= 0.0:
        raise ValueError(f"sum_y must be positive for a ratio estimate, got {sum_y!r}")
    z = normal_quantile(level)
    r = sum_x / sum_y
    mx, my = sum_x / n, sum_y / n
    var_x = sum_xx / n - mx * mx
    var_y = sum_yy / n - my * my
    cov = sum_xy / n - mx * my
    var_d = max(var_x - 2.0 * r * cov + r * r * var_y, 0.0) * n / max(n - 1, 1)
    se = math.sqrt(var_d / n) / my
    return Estimate(float(r), se, float(r - z * se), float(r + z * se), level)


def batch_ratio_estimate(x: np.ndarray, y: np.ndarray, level: float = 0.999) -> Estimate:
    """``Σx / Σy`` over independent batches (batch means), delta method on batch totals.

    Use this when the steps inside a batch are dependent but batches are independent;
    the quantile is Student's t with ``B − 1`` degrees of freedom for ``B`` batches.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(
            f"x and y must be 1-D arrays of the same length >= 2 (one total per batch), "
            f"got shapes {x.shape} and {y.shape}"
        )
    if y.sum() <= 0.0:
        raise ValueError("the batch totals y must have a positive sum")
    b = x.size
    r = float(x.sum() / y.sum())
    d = x - r * y
    se = float(math.sqrt(d.var(ddof=1) / b) / y.mean())
    level = validate.probability("level", level)
    t = float(_special.stdtrit(b - 1, 1.0 - (1.0 - level) / 2.0))
    return Estimate(r, se, r - t * se, r + t * se, level)


def wilson_interval(
    successes: np.ndarray | int, trials: np.ndarray | int, level: float = 0.999
) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval ``(low, high)`` for ``successes`` out of ``trials``.

    ``(p̂ + z²/2N ± z sqrt(p̂(1−p̂)/N + z²/4N²)) / (1 + z²/N)``; ``[0, 1]`` where
    ``trials = 0``; ``low = 0`` exactly when ``k = 0`` and ``high = 1`` when ``k = N``.
    Vectorised over arrays.
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("successes must lie in [0, trials]")
    z = normal_quantile(level)
    safe = np.where(n > 0, n, 1.0)
    p = k / safe
    denom = 1.0 + z * z / safe
    centre = (p + z * z / (2.0 * safe)) / denom
    half = z * np.sqrt(p * (1.0 - p) / safe + z * z / (4.0 * safe * safe)) / denom
    # Exact at the edges: k = 0 gives low = 0 and k = N gives high = 1 (no rounding).
    low = np.where((n > 0) & (k > 0), np.clip(centre - half, 0.0, 1.0), 0.0)
    high = np.where((n > 0) & (k < n), np.clip(centre + half, 0.0, 1.0), 1.0)
    return low, high


def binomial_z(successes: np.ndarray, trials: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Score statistic ``(k − N p)/sqrt(N p (1−p))`` per cell (0 or ±inf where p ∈ {0, 1})."""
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    p = np.asarray(p, dtype=float)
    sd = np.sqrt(n * p * (1.0 - p))
    diff = k - n * p
    exact = np.abs(diff) <= 1e-9 * np.maximum(n, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, diff / np.where(sd > 0, sd, 1.0), np.sign(diff) * np.inf)
    return np.where(exact & ~(sd > 0), 0.0, z)


def chi_square_gof(
    observed: np.ndarray, probabilities: np.ndarray, min_expected: float = 5.0
) -> ChiSquare:
    """Pearson χ² test of ``observed[i]`` counts against exact ``probabilities[i]``.

    Cells are pooled left to right until each pooled cell has expected count
    ``≥ min_expected`` (a short remainder joins the last cell); the statistic
    ``Σ (O − E)²/E`` has ``cells − 1`` degrees of freedom. Any count observed in a cell
    of probability exactly 0 is impossible under the hypothesis: statistic ``inf``,
    p-value 0 (so a formula with the wrong support is always rejected). A point-mass law
    observed where it sits fits exactly (p-value 1); otherwise fewer than two pooled cells
    leave nothing to test: ``ValueError`` (too few samples).
    """
    obs = np.asarray(observed, dtype=float)
    prob = np.asarray(probabilities, dtype=float)
    if obs.ndim != 1 or prob.ndim != 1:
        raise ValueError("observed and probabilities must be 1-D arrays")
    if np.any(obs < 0) or np.any(prob < 0):
        raise ValueError("observed counts and probabilities must be non-negative")
    size = max(obs.size, prob.size)
    obs = np.concatenate([obs, np.zeros(size - obs.size)])
    prob = np.concatenate([prob, np.zeros(size - prob.size)])
    total = obs.sum()
    if total <= 0:
        raise ValueError("observed must hold at least one count")
    if abs(prob.sum() - 1.0) > 1e-9:
        raise ValueError(f"probabilities must sum to 1, got {prob.sum()!r}")
    if np.any((prob == 0.0) & (obs > 0)):
        dof = max(int(np.count_nonzero(prob)) - 1, 0)
        return ChiSquare(math.inf, dof, 0.0, size, int(total))
    expected = prob * total
    pooled_o: list[float] = []
    pooled_e: list[float] = []
    acc_o = acc_e = 0.0
    for o, e in zip(obs, expected, strict=True):
        acc_o += o
        acc_e += e
        if acc_e >= min_expected:
            pooled_o.append(acc_o)
            pooled_e.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0 or acc_o > 0:
        if pooled_e:
            pooled_o[-1] += acc_o
            pooled_e[-1] += acc_e
        else:
            pooled_o.append(acc_o)
            pooled_e.append(acc_e)
    o_arr, e_arr = np.asarray(pooled_o), np.asarray(pooled_e)
    dof = o_arr.size - 1
    if dof == 0 and np.count_nonzero(prob) <= 1:  # a point mass, observed where it sits
        return ChiSquare(0.0, 0, 1.0, 1, int(total))
    if dof == 0:
        raise ValueError(
            f"too few samples ({int(total)}) for a chi-square test: fewer than 2 cells reach "
            f"an expected count of {min_expected}"
        )
    stat = float(((o_arr - e_arr) ** 2 / e_arr).sum())
    p_value = float(_special.chdtrc(dof, stat))
    return ChiSquare(stat, dof, p_value, int(o_arr.size), int(total))
