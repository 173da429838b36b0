"""Simulation versus exact theory: a z-score for every quantity ``ewif.Cascade`` predicts.

``compare_with_exact(cascade)`` simulates the cascade (:func:`simulate.bernoulli.simulate`) and
sets each estimate against the exact value:

* ``ewif``, ``expected_tokens``, ``expected_cost``, ``calls[i]``:
  ``z = (estimate − exact) / se`` (delta method for EWIF, CLT for means);
* ``accept@i`` (the Figure-2 curve, unconditional): the binomial score statistic
  ``z = (k − N p)/sqrt(N p (1−p))`` with the exact ``p = acceptance_by_position(m)[i−1]``;
* ``tokens_pgf``: Pearson's χ² of the tokens-per-step histogram against
  ``tokens_pgf()``, reported as its p-value and the one-sided score ``Φ⁻¹(1 − p)``.

Under a correct theory every ``z`` is approximately standard normal. :meth:`Comparison.agrees`
tests all of them at once with a Bonferroni correction: each ``|z|`` within
``Φ⁻¹(1 − (1 − level)/(2q))`` and the χ² p-value above ``(1 − level)/q`` for ``q`` tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ewif.base import validate
from simulate.bernoulli import simulate
from simulate.estimates import SimulationResult
from simulate.stats import ChiSquare, binomial_z, chi_square_gof, normal_quantile


@dataclass(frozen=True)
class Row:
    """One compared quantity."""

    quantity: str
    simulated: float
    exact: float
    se: float
    z: float

    def to_dict(self) -> dict[str, Any]:
        """The fields by name."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Comparison:
    """z-scores of a simulation against the exact values of the same cascade."""

    rows: tuple[Row, ...]
    chi_square: ChiSquare
    result: SimulationResult

    @property
    def max_abs_z(self) -> float:
        return float(max(abs(r.z) for r in self.rows))

    def row(self, quantity: str) -> Row:
        for r in self.rows:
            if r.quantity == quantity:
                return r
        raise KeyError(f"no quantity {quantity!r}; have {[r.quantity for r in self.rows]}")

    def agrees(self, level: float = 0.999) -> bool:
        """True when no test rejects at family-wise level ``level`` (Bonferroni)."""
        q = len(self.rows) + 1
        z_max = normal_quantile(1.0 - (1.0 - level) / q)
        return self.max_abs_z <= z_max and self.chi_square.p_value >= (1.0 - level) / q

    def to_dict(self, level: float = 0.999) -> dict[str, Any]:
        return {
            "trials": self.result.trials,
            "seed": self.result.seed,
            "interrupted": self.result.interrupted,
            "rows": [r.to_dict() for r in self.rows],
            "tokens_chi_square": self.chi_square.to_dict(),
            "agrees": self.agrees(level),
            "level": level,
        }


def default_max_position(cascade: Any, floor: float = 1e-3, cap: int = 64) -> int:
    """The last draft position whose exact acceptance probability is at least ``floor``."""
    curve = np.asarray(cascade.acceptance_by_position(cap), dtype=float)
    big = np.flatnonzero(curve >= floor)
    return int(big[-1] + 1) if big.size else 1


def compare_with_exact(
    cascade: Any,
    trials: int = 200_000,
    seed: int | None = 0,
    *,
    max_position: int | None = None,
    result: SimulationResult | None = None,
    progress: bool = False,
    level: float = 0.999,
) -> Comparison:
    """Simulate ``cascade`` (or use ``result``) and z-score it against its exact values."""
    if result is None:
        result = simulate(cascade, trials, seed, progress=progress)
    m = (
        default_max_position(cascade)
        if max_position is None
        else validate.count("max_position", max_position, minimum=1)
    )
    rows: list[Row] = []
    for name, est, exact in (
        ("ewif", result.ewif(level), cascade.ewif()),
        ("expected_tokens", result.expected_tokens(level), cascade.expected_tokens()),
        ("expected_cost", result.expected_cost(level), cascade.expected_cost()),
    ):
        rows.append(Row(name, est.value, float(exact), est.se, est.z(float(exact))))
    for i, (est, exact) in enumerate(
        zip(result.passes_per_step(level), cascade.passes_per_step(), strict=True)
    ):
        rows.append(Row(f"calls[{i}]", est.value, float(exact), est.se, est.z(float(exact))))
    curve = result.acceptance_by_position(m, level)
    exact_curve = np.asarray(cascade.acceptance_by_position(m), dtype=float)
    zs = binomial_z(curve.successes, curve.trials, exact_curve)
    for i in range(m):
        se = float(np.sqrt(exact_curve[i] * (1.0 - exact_curve[i]) / curve.trials[i]))
        rows.append(
            Row(f"accept@{i + 1}", float(curve.p[i]), float(exact_curve[i]), se, float(zs[i]))
        )
    chi = chi_square_gof(result.token_counts(), cascade.tokens_pgf().coefficients)
    return Comparison(tuple(rows), chi, result)
