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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ewif.base import validate
from simulate.contract import FILLS, is_leaf
from simulate.estimates import SimulationResult, StepBatch, run_batches


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
        """The contract's leaf rule (:func:`simulate.contract.is_leaf`)."""
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


class StepPlayer:
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
    engine = StepPlayer(spec, acceptance)
    tally, interrupted, seconds = run_batches(
        lambda size: engine.run(size, rng), spec.n + 1, trials, batch_size, progress
    )
    unit = float(spec.cost[0] + spec.cost_per_token[0])
    return SimulationResult(tally, unit, seed, batch_size, interrupted, seconds)
