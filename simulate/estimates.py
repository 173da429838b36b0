"""What simulated target steps estimate: a batch of steps, their sums, the estimates.

Every Monte Carlo of this package (:mod:`simulate.bernoulli`, :mod:`simulate.special`,
:mod:`simulate.correlated`, :mod:`simulate.loop_reference`) yields batches of independent
target steps (:class:`StepBatch`); :func:`run_batches` adds them into their sufficient
statistics (:class:`Tally`; Ctrl-C keeps what was added), from which
:class:`SimulationResult` estimates EWIF (the ratio ΣT/ΣC with a delta-method interval,
:func:`simulate.stats.ratio_estimate`), the mean tokens, cost and passes per step, and the
Figure-2 curve with Wilson intervals.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ewif.base import validate
from simulate.stats import Estimate, mean_estimate, ratio_estimate, wilson_interval


@dataclass
class StepBatch:
    """Per-step outcomes of one batch of target steps (arrays of length ``size``)."""

    tokens: np.ndarray
    cost: np.ndarray
    passes: np.ndarray  # (n+1, size) passes of each model
    draft: np.ndarray  # length of the target's draft
    accepted: np.ndarray  # tokens of that draft the target accepted


def _padded(hist: np.ndarray, size: int) -> np.ndarray:
    """``hist`` zero-padded to at least ``size`` entries (never cut)."""
    if hist.size >= size:
        return hist
    return np.concatenate([hist, np.zeros(size - hist.size, dtype=hist.dtype)])


def _add_hist(hist: np.ndarray, values: np.ndarray) -> np.ndarray:
    counts = np.bincount(values)
    if counts.size > hist.size:
        hist = np.concatenate([hist, np.zeros(counts.size - hist.size, dtype=np.int64)])
    hist[: counts.size] += counts
    return hist


@dataclass
class Tally:
    """Sufficient statistics of simulated target steps; batches are merged by adding."""

    n_models: int
    trials: int = 0
    sum_tokens: float = 0.0
    sum_tokens_sq: float = 0.0
    sum_cost: float = 0.0
    sum_cost_sq: float = 0.0
    sum_tokens_cost: float = 0.0
    passes_sum: np.ndarray = field(default=None)  # type: ignore[assignment]
    passes_sq: np.ndarray = field(default=None)  # type: ignore[assignment]
    token_hist: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    accepted_hist: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rejected_at_hist: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if self.passes_sum is None:
            self.passes_sum = np.zeros(self.n_models, dtype=np.float64)
            self.passes_sq = np.zeros(self.n_models, dtype=np.float64)

    def add(self, b: StepBatch) -> None:
        # Plain multiply-and-sum, not ``@``: BLAS threads make 1-D dots slow on shared cores.
        t = b.tokens
        self.trials += int(t.size)
        self.sum_tokens += float(t.sum())
        self.sum_tokens_sq += float((t * t).sum())
        self.sum_cost += float(b.cost.sum())
        self.sum_cost_sq += float((b.cost * b.cost).sum())
        self.sum_tokens_cost += float((t * b.cost).sum())
        self.passes_sum += b.passes.sum(axis=1)
        self.passes_sq += (b.passes * b.passes).sum(axis=1)
        self.token_hist = _add_hist(self.token_hist, t)
        self.accepted_hist = _add_hist(self.accepted_hist, b.accepted)
        rejected = b.accepted < b.draft
        self.rejected_at_hist = _add_hist(self.rejected_at_hist, b.accepted[rejected] + 1)


@dataclass(frozen=True)
class PositionCurve:
    """Per-position acceptance (positions ``1..m`` of the target's draft) with Wilson CIs.

    ``successes[i−1]`` steps accepted position ``i`` out of ``trials[i−1]``; ``p`` is
    the estimate and ``(low, high)`` the Wilson interval at ``level``.
    """

    successes: np.ndarray
    trials: np.ndarray
    p: np.ndarray
    low: np.ndarray
    high: np.ndarray
    level: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "successes": self.successes.tolist(),
            "trials": self.trials.tolist(),
            "p": self.p.tolist(),
            "low": self.low.tolist(),
            "high": self.high.tolist(),
            "level": self.level,
        }


@dataclass(frozen=True)
class SimulationResult:
    """Monte Carlo estimates for a cascade from ``trials`` simulated target steps.

    ``interrupted`` is True when the run was stopped early (Ctrl-C): the estimates are
    then those of the steps completed. Reproducible for the same
    ``(seed, trials, batch_size)``. ``unit_cost`` is the cost of one autoregressive
    target token, ``cost[0] + cost_per_token[0]``, the unit of EWIF.
    """

    tally: Tally
    unit_cost: float
    seed: int | None
    batch_size: int
    interrupted: bool
    seconds: float

    @property
    def trials(self) -> int:
        """Target steps simulated."""
        return self.tally.trials

    @property
    def steps_per_second(self) -> float:
        """Simulated target steps per wall-clock second (inf for a run too fast to time)."""
        return self.trials / self.seconds if self.seconds > 0 else float("inf")

    def ewif(self, level: float = 0.999) -> Estimate:
        """EWIF = ``unit_cost``·ΣT/ΣC with its delta-method interval."""
        t = self.tally
        e = ratio_estimate(
            t.sum_tokens,
            t.sum_cost,
            t.sum_tokens_sq,
            t.sum_cost_sq,
            t.sum_tokens_cost,
            t.trials,
            level,
        )
        u = self.unit_cost
        return Estimate(e.value * u, e.se * u, e.low * u, e.high * u, level)

    def expected_tokens(self, level: float = 0.999) -> Estimate:
        """Mean tokens per target step."""
        t = self.tally
        return mean_estimate(t.sum_tokens, t.sum_tokens_sq, t.trials, level)

    def expected_cost(self, level: float = 0.999) -> Estimate:
        """Mean cost per target step (target pass = 1)."""
        t = self.tally
        return mean_estimate(t.sum_cost, t.sum_cost_sq, t.trials, level)

    def passes_per_step(self, level: float = 0.999) -> list[Estimate]:
        """Mean passes of each model ``0..n`` per target step."""
        t = self.tally
        return [
            mean_estimate(float(s), float(q), t.trials, level)
            for s, q in zip(t.passes_sum, t.passes_sq, strict=True)
        ]

    def token_counts(self) -> np.ndarray:
        """``counts[i]`` = number of steps that produced exactly ``i`` tokens."""
        return self.tally.token_hist.copy()

    def tokens_distribution(self) -> np.ndarray:
        """Empirical ``P(tokens per step = i)``."""
        return self.tally.token_hist / self.tally.trials

    def acceptance_by_position(
        self, max_position: int, level: float = 0.999, conditional: bool = False
    ) -> PositionCurve:
        """The Figure-2 curve for positions ``1..max_position`` of the target's draft.

        Unconditional (default): ``P(position i exists and is accepted)`` over all steps.
        ``conditional=True``: the same given that position ``i`` exists and is reached
        (all earlier positions accepted) — the per-position acceptance rate.
        """
        m = validate.count("max_position", max_position, minimum=1)
        acc = _padded(self.tally.accepted_hist, m + 1)
        ok = np.cumsum(acc[::-1])[::-1][1 : m + 1]  # ok[i-1] = #(accepted >= i)
        if conditional:
            n = ok + _padded(self.tally.rejected_at_hist, m + 1)[1 : m + 1]
        else:
            n = np.full(m, self.tally.trials)
        ok = ok.astype(np.int64)
        n = n.astype(np.int64)
        p = np.where(n > 0, ok / np.maximum(n, 1), np.nan)
        low, high = wilson_interval(ok, n, level)
        return PositionCurve(ok, n, p, low, high, level)

    def to_dict(self, level: float = 0.999, max_position: int = 16) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "interrupted": self.interrupted,
            "seconds": self.seconds,
            "interval": "delta method (ratio estimator), normal quantile",
            "ewif": self.ewif(level).to_dict(),
            "expected_tokens": self.expected_tokens(level).to_dict(),
            "expected_cost": self.expected_cost(level).to_dict(),
            "calls": [e.to_dict() for e in self.passes_per_step(level)],
            "tokens_distribution": self.tokens_distribution().tolist(),
            "acceptance_by_position": self.acceptance_by_position(max_position, level).to_dict(),
        }


def run_batches(
    make_batch: Callable[[int], StepBatch],
    n_models: int,
    trials: int,
    batch_size: int,
    progress: bool,
) -> tuple[Tally, bool, float]:
    """Accumulate ``trials`` steps from ``make_batch(size)``; Ctrl-C keeps the partial tally."""
    from tqdm.auto import tqdm

    tally = Tally(n_models)
    interrupted = False
    start = time.perf_counter()
    with tqdm(total=trials, unit="step", unit_scale=True, disable=not progress) as bar:
        try:
            while tally.trials < trials:
                size = min(batch_size, trials - tally.trials)
                tally.add(make_batch(size))
                bar.update(size)
        except KeyboardInterrupt:
            if tally.trials == 0:
                raise
            interrupted = True
    return tally, interrupted, time.perf_counter() - start
