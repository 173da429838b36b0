"""Direct Monte Carlo of the paper's three special cases, token by token.

Each sampler draws one uniform per tested token (an ``N × length`` matrix) and counts
the leading run of acceptances — a different sampling path from the general engine
(:mod:`simulate.bernoulli`, geometric runs, nested calls), so the two cross-check each
other and the closed forms of ``ewif``:

* :func:`simulate_sd` — one drafter with draft length ``k`` (Cor. 4.2):
  tokens = accepted + 1 with accepted ≤ k, cost ``1 + k c``;
* :func:`simulate_vertical` — Theorem 4.3: ``n`` rounds of ``d1`` reviewing ``k``-token
  drafts of ``d2``, then one target review of everything ``d1`` produced; cost
  ``1 + n c1 + n k c2``;
* :func:`simulate_horizontal` — Theorem 4.5: position ``i`` drafted by its own model
  (acceptance ``alphas[i]``, cost ``costs[i]``), one target pass; cost ``1 + Σ c_i``.

All return a :class:`~simulate.estimates.SimulationResult` (costs per pass, no
per-token term), seeded and chunked like :func:`simulate.bernoulli.simulate`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ewif.base import validate
from simulate.bernoulli import generator
from simulate.estimates import SimulationResult, StepBatch, run_batches


def _leading_run(accept: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    """Per row: the number of leading True entries among the first ``length`` columns."""
    if accept.shape[1] == 0:
        return np.zeros(accept.shape[0], dtype=np.int64)
    first_false = np.where(accept.all(axis=1), accept.shape[1], np.argmin(accept, axis=1))
    return np.minimum(first_false, length).astype(np.int64)


def _run(
    make: Callable[[int, np.random.Generator], StepBatch],
    n_models: int,
    trials: int,
    seed: int | None,
    batch_size: int,
    progress: bool,
) -> SimulationResult:
    trials = validate.count("trials", trials, minimum=2)
    batch_size = validate.count("batch_size", batch_size, minimum=1)
    rng = generator(seed)
    tally, interrupted, seconds = run_batches(
        lambda size: make(size, rng), n_models, trials, batch_size, progress
    )
    return SimulationResult(tally, 1.0, seed, batch_size, interrupted, seconds)


def simulate_sd(
    alpha: float,
    k: int,
    c: float,
    trials: int = 100_000,
    seed: int | None = 0,
    *,
    batch_size: int = 1 << 14,
    progress: bool = False,
) -> SimulationResult:
    """Plain speculative decoding: ``k`` draft tokens, each accepted w.p. ``alpha``."""
    alpha = validate.probability("alpha", alpha)
    k = validate.count("k", k)
    c = validate.cost("c", c)

    def make(size: int, rng: np.random.Generator) -> StepBatch:
        accepted = _leading_run(rng.random((size, k)) < alpha, k)
        passes = np.vstack([np.ones(size, dtype=np.int64), np.full(size, k, dtype=np.int64)])
        draft = np.full(size, k, dtype=np.int64)
        return StepBatch(accepted + 1, 1.0 + k * c + np.zeros(size), passes, draft, accepted)

    return _run(make, 2, trials, seed, batch_size, progress)


def simulate_vertical(
    alpha: float,
    alpha2: float,
    k: int,
    n: int,
    c1: float,
    c2: float,
    trials: int = 100_000,
    seed: int | None = 0,
    *,
    batch_size: int = 1 << 14,
    progress: bool = False,
) -> SimulationResult:
    """Theorem 4.3: ``n`` rounds (d1 reviews ``k`` tokens of d2, acceptance ``alpha2``)
    build the draft, which the target reviews with acceptance ``alpha``."""
    alpha = validate.probability("alpha", alpha)
    alpha2 = validate.probability("alpha2", alpha2)
    k = validate.count("k", k)
    n = validate.count("n", n)
    c1 = validate.cost("c1", c1)
    c2 = validate.cost("c2", c2)

    def make(size: int, rng: np.random.Generator) -> StepBatch:
        draft = np.zeros(size, dtype=np.int64)
        for _ in range(n):
            draft += _leading_run(rng.random((size, k)) < alpha2, k) + 1
        width = int(draft.max(initial=0))
        accepted = _leading_run(rng.random((size, width)) < alpha, draft)
        passes = np.vstack(
            [np.ones(size, dtype=np.int64), np.full(size, n), np.full(size, n * k)]
        ).astype(np.int64)
        cost = np.full(size, 1.0 + n * c1 + n * k * c2)
        return StepBatch(accepted + 1, cost, passes, draft, accepted)

    return _run(make, 3, trials, seed, batch_size, progress)


def simulate_horizontal(
    alphas: object,
    costs: object,
    trials: int = 100_000,
    seed: int | None = 0,
    *,
    batch_size: int = 1 << 14,
    progress: bool = False,
) -> SimulationResult:
    """Theorem 4.5: draft position ``i`` (1-based) by a model with ``alphas[i−1]``,
    ``costs[i−1]``; one target pass over the ``k = len(alphas)`` tokens.

    Call counts are reported per position (row ``i`` = the drafter of position ``i``).
    """
    a = validate.probabilities("alphas", alphas)
    c = validate.costs("costs", costs)
    if a.ndim != 1 or c.shape != a.shape:
        raise ValueError(
            f"alphas and costs must be 1-D of the same length, got {a.shape} and {c.shape}"
        )
    k = a.size

    def make(size: int, rng: np.random.Generator) -> StepBatch:
        accepted = _leading_run(rng.random((size, k)) < a, k)
        passes = np.ones((k + 1, size), dtype=np.int64)
        draft = np.full(size, k, dtype=np.int64)
        cost = np.full(size, 1.0 + float(c.sum()))
        return StepBatch(accepted + 1, cost, passes, draft, accepted)

    return _run(make, k + 1, trials, seed, batch_size, progress)
