"""Vectorised Monte Carlo of Algorithm 1 under the Bernoulli acceptance model.

The independent witness for :class:`ewif.Cascade`: it reads only the configuration
(``.alpha .cost .cost_per_token .cost_curve .K .n .fill``) and *plays* the algorithm — it
shares no formula with ``ewif`` (it prices each pass from the cost table itself).

Semantics: Algorithm 1 as stated once, in the docstring of :mod:`ewif.kernel.cascade` (models
``0..n``, K, review calls block by block, leaves, ``fill``, pass costs ``c_i(m)``, EWIF).
What this module adds to that contract:

* In 0-based numpy terms, when model ``r`` reviews, drafter ``j > r`` gets the budget
  ``K[r, j−1]``; each token of ``j``'s block is accepted independently with probability
  ``alpha[r, j]``.
* Every pass is priced from the configuration's own cost table — ``cost[i] +
  cost_per_token[i]·m``, or the measured curve ``cost_curve[i][m − 1]`` extended by the
  rule of :mod:`ewif.kernel.cascade` — with ``m = D + 1`` for a review of ``D`` tokens and
  ``m = 1`` for a leaf's generating pass.
* EWIF is estimated by the ratio of sums over target steps, × the cost of one
  autoregressive target token, with a **delta-method** interval (steps are i.i.d.;
  :func:`simulate.stats.ratio_estimate`).

Vectorisation: ``batch_size`` independent target steps run at once; the recursion is
followed level by level, each nested review call acting on the sub-array of steps still
filling that block (masks), so one Python-level call handles every step of the batch.
Acceptance runs are drawn as geometric variables (leading acceptances before the first
rejection), not token by token.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ewif.base import validate
from ewif.kernel.budgets import FILLS, is_leaf
from simulate.stats import Estimate, mean_estimate, ratio_estimate, wilson_interval


@dataclass(frozen=True)
class CascadeSpec:
    """The configuration the simulator reads from an ``ewif.Cascade`` (nothing else)."""

    alpha: np.ndarray
    cost: np.ndarray
    cost_per_token: np.ndarray
    K: np.ndarray
    fill: str
    cost_curve: tuple[np.ndarray, ...] | None = None

    @property
    def n(self) -> int:
        return int(self.K.shape[0])

    @classmethod
    def of(cls, cascade: Any) -> CascadeSpec:
        """Read and check ``.alpha .cost .cost_per_token .cost_curve .K .n .fill`` of a cascade
        (``cost_per_token`` and ``cost_curve`` may be absent or None)."""
        if isinstance(cascade, CascadeSpec):
            return cascade
        missing = [a for a in ("alpha", "cost", "K") if not hasattr(cascade, a)]
        if missing:
            raise TypeError(
                f"cascade must be an ewif.Cascade (with .alpha, .cost, .K), "
                f"got {type(cascade).__name__} without {', '.join(missing)}"
            )
        n = int(np.shape(cascade.K)[0]) if np.ndim(cascade.K) == 2 else -1
        if n < 1:
            raise ValueError(f"K must be a square n×n matrix with n >= 1, got {cascade.K!r}")
        K = validate.budget_matrix("K", cascade.K, n)
        alpha = np.asarray(cascade.alpha, dtype=float)
        if alpha.shape != (n + 1, n + 1):
            raise ValueError(f"alpha must be {n + 1}x{n + 1} for K of size {n}, got {alpha.shape}")
        cost = validate.costs("cost", cascade.cost)
        cpt_raw = getattr(cascade, "cost_per_token", None)
        cpt = np.zeros(n + 1) if cpt_raw is None else validate.costs("cost_per_token", cpt_raw)
        if cost.shape != (n + 1,) or cpt.shape != (n + 1,):
            raise ValueError(
                f"cost and cost_per_token must have {n + 1} entries, got {cost.shape}, {cpt.shape}"
            )
        fill = getattr(cascade, "fill", "tokens")
        if fill not in FILLS:
            raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
        for r in range(n):
            for j in range(r + 1, n + 1):
                if K[r, j - 1]:
                    validate.probability(f"alpha[{r}][{j}]", float(alpha[r, j]))
        raw = getattr(cascade, "cost_curve", None)
        curves = None
        if raw is not None:
            if len(raw) != n + 1:
                raise ValueError(f"cost_curve must hold {n + 1} curves, got {len(raw)}")
            curves = tuple(validate.costs(f"cost_curve[{i}]", c) for i, c in enumerate(raw))
            for i, c in enumerate(curves):
                if c.ndim != 1 or c.size == 0:
                    raise ValueError(f"cost_curve[{i}] must be a non-empty list, got {c!r}")
        return cls(alpha, cost, cpt, K, fill, curves)

    def pass_cost(self, i: int, m: np.ndarray) -> np.ndarray:
        """Cost of passes of model ``i`` that process ``m`` positions each (array ``m >= 1``)."""
        if self.cost_curve is None:
            return self.cost[i] + self.cost_per_token[i] * m
        y = self.cost_curve[i]
        last = y.size
        rise = y[-1] - y[-2] if last >= 2 else 0.0
        step = rise if rise > 0 else 0.0  # a falling end is continued flat
        measured = y[np.minimum(m, last) - 1]
        return np.where(m <= last, measured, y[-1] + step * (m - last))

    def is_leaf(self, j: int) -> bool:
        """The contract's leaf rule (a definition shared with ``ewif``, not a formula)."""
        return is_leaf(self.K, j)


Blocks = list[tuple[int, np.ndarray]]  # (drafter j, block length per step), in draft order


class AcceptanceProcess(Protocol):
    """How a reviewer's acceptance tests are drawn (i.i.d. Bernoulli by default).

    ``accepted(r, blocks, steps, rng)`` returns a new int64 array holding, per step, the
    number of leading acceptances (before the first rejection, at most the draft length)
    when reviewer ``r`` tests its draft, made of ``blocks`` — ``(j, length)`` pairs in
    draft order. ``steps`` are the batch positions (stream ids) of the steps, for
    stateful processes.
    """

    def accepted(
        self, r: int, blocks: Blocks, steps: np.ndarray, rng: np.random.Generator
    ) -> np.ndarray: ...


BlockTest = Callable[
    [int, int, np.ndarray, np.ndarray, np.ndarray, np.random.Generator], np.ndarray
]


def blockwise(
    test: BlockTest, r: int, blocks: Blocks, steps: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Leading acceptances over a draft from a per-block test.

    ``test(r, j, steps, offset, length, rng)`` gives the leading acceptances (at most
    ``length``) of a block of ``j`` starting at draft position ``offset + 1``; it is only
    called for the steps whose earlier blocks were accepted in full.
    """
    m = steps.size
    if not blocks:
        return np.zeros(m, dtype=np.int64)
    j, length = blocks[0]
    accepted = test(r, j, steps, np.zeros(m, dtype=np.int64), length, rng)
    offset = length.copy()
    alive = np.flatnonzero(accepted == length)
    for j, length in blocks[1:]:
        if not alive.size:
            break
        lj = length[alive]
        a = test(r, j, steps[alive], offset[alive], lj, rng)
        accepted[alive] += a
        offset += length
        alive = alive[a == lj]
    return accepted


@dataclass(frozen=True)
class IidAcceptance:
    """Independent Bernoulli(``alpha[r, j]``) tests, one exponential per review.

    With ``E ~ Exp(1)`` and ``h = −ln α``, the leading run of a block is ``⌊E/h⌋``
    capped at its length ``L``: ``P(run ≥ i) = P(E ≥ i h) = α^i``. When the whole block
    is accepted (``E ≥ L h``), ``E − L h`` is again Exp(1) and independent of the past
    (memorylessness), so it drives the next block — exact, with one ziggurat draw per
    review instead of one per block (or per token).
    """

    alpha: np.ndarray

    def accepted(self, r, blocks, steps, rng):
        """Leading acceptances over the draft (see ``AcceptanceProcess``)."""
        m = steps.size
        accepted: np.ndarray | None = None  # None: nothing accepted yet
        alive: np.ndarray | None = None  # None: every step is still alive
        e: np.ndarray | None = None
        last = len(blocks) - 1
        for i, (j, length) in enumerate(blocks):
            a = float(self.alpha[r, j])
            if a <= 0.0:
                break
            if a >= 1.0:
                take = length if alive is None else length * alive
                accepted = take.copy() if accepted is None else accepted + take
                continue
            h = -math.log(a)
            if e is None:
                e = rng.standard_exponential(m)
            e *= 1.0 / h  # in units of tokens
            if i == last:  # no residual needed: clip in place
                take = np.minimum(e, length, out=e).astype(np.int64)
            else:
                take = np.minimum(e, length).astype(np.int64)
            if alive is not None:
                take *= alive
            accepted = take if accepted is None else accepted + take
            if i < last:
                full = take == length
                alive = full if alive is None else alive & full
                e -= length
                e *= h  # the memoryless residual, back in Exp(1) units
        return np.zeros(m, dtype=np.int64) if accepted is None else accepted


@dataclass
class StepBatch:
    """Per-step outcomes of one batch of target steps (arrays of length ``size``)."""

    tokens: np.ndarray
    cost: np.ndarray
    passes: np.ndarray  # (n+1, size) passes of each model
    draft: np.ndarray  # length of the target's draft
    accepted: np.ndarray  # tokens of that draft the target accepted


class Engine:
    """Plays target steps of one cascade, vectorised over a batch.

    Step ``i`` of a batch is also stream ``i`` for a stateful acceptance process.
    """

    def __init__(self, spec: CascadeSpec, process: AcceptanceProcess | None = None) -> None:
        self.spec = spec
        self.process = IidAcceptance(spec.alpha) if process is None else process
        self._leaf = [spec.is_leaf(j) for j in range(spec.n + 1)]
        self._constants: dict[int, np.ndarray] = {}

    def _constant(self, k: int, m: int) -> np.ndarray:
        """A read-only array of ``m`` copies of ``k`` (a view of a cached array)."""
        arr = self._constants.get(k)
        if arr is None or arr.size < m:
            arr = np.full(max(m, 1 << 14), k, dtype=np.int64)
            arr.setflags(write=False)
            self._constants[k] = arr
        return arr[:m]

    def run(self, size: int, rng: np.random.Generator) -> StepBatch:
        """One target step for each of ``size`` steps."""
        spec = self.spec
        n1 = spec.n + 1
        self._log: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(n1)]
        tokens, draft, accepted = self._review(0, np.arange(size), rng)
        # Passes per step, from the log of review calls; a pass processes m = 1 position
        # (leaf) or D + 1 (review of D drafted tokens): cost = (c + cpt)·passes + cpt·D.
        passes = np.zeros((n1, size), dtype=np.int64)
        drafted = np.zeros((n1, size), dtype=np.int64)
        for r, log in enumerate(self._log):
            if log:
                where = np.concatenate([w for w, _ in log])
                passes[r] = np.bincount(where, minlength=size)
                if spec.cost_per_token[r]:
                    weights = np.concatenate([d for _, d in log])
                    drafted[r] = np.bincount(where, weights=weights, minlength=size)
        # A leaf j makes K[r, j-1] one-position passes in every review call of r.
        for j in range(1, n1):
            if self._leaf[j]:
                for r in range(j):
                    if spec.K[r, j - 1]:
                        passes[j] += spec.K[r, j - 1] * passes[r]
        if spec.cost_curve is None:
            cost = _weighted(spec.cost + spec.cost_per_token, passes)
            if spec.cost_per_token.any():
                cost += _weighted(spec.cost_per_token, drafted)
        else:  # price every logged review pass at its own m = D + 1; leaves at m = 1
            cost = np.zeros(size)
            for r, log in enumerate(self._log):
                for where, d in log:
                    cost += np.bincount(where, weights=spec.pass_cost(r, d + 1), minlength=size)
            for j in range(1, n1):
                if self._leaf[j]:
                    cost += spec.pass_cost(j, np.ones(1, dtype=np.int64))[0] * passes[j]
        return StepBatch(tokens, cost, passes, draft, accepted)

    def _review(
        self, r: int, where: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Review calls of model ``r`` for the steps at positions ``where`` of the batch.

        Returns ``(tokens yielded, draft length, accepted)`` per step.
        """
        spec = self.spec
        m = where.size
        blocks: list[tuple[int, np.ndarray]] = []
        for j in range(r + 1, spec.n + 1):
            k = int(spec.K[r, j - 1])
            if k == 0:
                continue
            if self._leaf[j]:
                length = self._constant(k, m)
            elif spec.fill == "rounds":
                length = self._review(j, where, rng)[0]
                for _ in range(k - 1):
                    length += self._review(j, where, rng)[0]
            else:
                length = self._review(j, where, rng)[0]
                active = np.flatnonzero(length < k)
                while active.size:
                    length[active] += self._review(j, where[active], rng)[0]
                    active = active[length[active] < k]
            blocks.append((j, length))
        if len(blocks) == 1:
            draft = blocks[0][1]
        else:
            draft = np.zeros(m, dtype=np.int64)
            for _, length in blocks:
                draft += length
        self._log[r].append((where, draft))
        accepted = self.process.accepted(r, blocks, where, rng)
        return accepted + 1, draft, accepted


def _weighted(w: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``w @ rows`` as an explicit sum over the few rows (no BLAS call)."""
    out = np.zeros(rows.shape[1])
    for wi, row in zip(w, rows, strict=True):
        if wi:
            out += wi * row
    return out


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


def generator(seed: int | None) -> np.random.Generator:
    """The project's Monte Carlo generator: SFC64 (faster than PCG64 here), seeded."""
    return np.random.Generator(np.random.SFC64(seed))


def simulate(
    cascade: Any,
    trials: int = 1_000_000,
    seed: int | None = 0,
    *,
    batch_size: int = 1 << 14,
    progress: bool = False,
    acceptance: AcceptanceProcess | None = None,
) -> SimulationResult:
    """Simulate ``trials`` independent target steps of ``cascade`` (an ``ewif.Cascade``).

    ``acceptance`` replaces the i.i.d. Bernoulli tests by another process whose steps
    stay independent (e.g. :class:`simulate.correlated.PositionAcceptance`).
    ``progress`` shows a tqdm bar; Ctrl-C returns the steps done so far with
    ``interrupted=True``.
    """
    spec = CascadeSpec.of(cascade)
    trials = validate.count("trials", trials, minimum=2)
    batch_size = validate.count("batch_size", batch_size, minimum=1)
    rng = generator(seed)
    engine = Engine(spec, acceptance)
    tally, interrupted, seconds = run_batches(
        lambda size: engine.run(size, rng), spec.n + 1, trials, batch_size, progress
    )
    unit = float(spec.cost[0] + spec.cost_per_token[0])
    return SimulationResult(tally, unit, seed, batch_size, interrupted, seconds)
