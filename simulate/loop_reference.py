"""A plain per-trial Python loop of Algorithm 1 — the readable reference.

Same semantics as :mod:`simulate.bernoulli` (see its docstring), written the obvious way:
one target step at a time, recursion by ordinary function calls, one uniform draw per
tested token (``random.Random``). It is the baseline of ``benchmarks/bench_simulate.py``
and a cross-check of the vectorised engine in the tests; it shares no code with it
beyond :class:`~simulate.bernoulli.CascadeSpec` (the configuration reader) and the
:class:`~simulate.estimates.Tally` that summarises steps.
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

from ewif.base import validate
from simulate.bernoulli import CascadeSpec
from simulate.estimates import SimulationResult, StepBatch, Tally


class _Step:
    """One target step: passes and processed positions per model (``verified``)."""

    def __init__(self, spec: CascadeSpec, rng: random.Random) -> None:
        self.spec = spec
        self.rng = rng
        self.alpha = spec.alpha.tolist()
        self.K = spec.K.tolist()
        self.leaf = [spec.is_leaf(j) for j in range(spec.n + 1)]
        self.passes = [0] * (spec.n + 1)
        self.verified = [0] * (spec.n + 1)
        self.spent = 0.0  # cost of the step's passes, priced one by one (measured curves)
        self.curve = spec.cost_curve is not None

    def review(self, r: int) -> tuple[int, int, int]:
        """One review call of model ``r``: (tokens yielded, draft length, accepted)."""
        n = self.spec.n
        draft: list[int] = []  # the drafter of each draft token, in order
        for j in range(r + 1, n + 1):
            k = self.K[r][j - 1]
            if k == 0:
                continue
            if self.leaf[j]:
                self.passes[j] += k
                self.verified[j] += k
                if self.curve:
                    self.spent += k * float(self.spec.pass_cost(j, np.array([1]))[0])
                draft.extend([j] * k)
            elif self.spec.fill == "rounds":
                for _ in range(k):
                    draft.extend([j] * self.review(j)[0])
            else:
                block = 0
                while block < k:
                    y = self.review(j)[0]
                    draft.extend([j] * y)
                    block += y
        self.passes[r] += 1
        self.verified[r] += len(draft) + 1
        if self.curve:
            self.spent += float(self.spec.pass_cost(r, np.array([len(draft) + 1]))[0])
        accepted = 0
        for j in draft:
            if self.rng.random() < self.alpha[r][j]:
                accepted += 1
            else:
                break
        return accepted + 1, len(draft), accepted


def simulate_loop(cascade: Any, trials: int, seed: int | None = 0) -> SimulationResult:
    """Simulate ``trials`` target steps one by one; same result type as ``simulate``."""
    spec = CascadeSpec.of(cascade)
    trials = validate.count("trials", trials, minimum=2)
    rng = random.Random(seed)
    n1 = spec.n + 1
    rows: list[tuple[int, int, int]] = []
    passes: list[list[int]] = []
    verified: list[list[int]] = []
    spent: list[float] = []
    start = time.perf_counter()
    for _ in range(trials):
        step = _Step(spec, rng)
        rows.append(step.review(0))
        passes.append(step.passes)
        verified.append(step.verified)
        spent.append(step.spent)
    seconds = time.perf_counter() - start
    tokens, draft, accepted = (np.asarray(col, dtype=np.int64) for col in zip(*rows, strict=True))
    passes_arr = np.asarray(passes, dtype=np.int64).T
    if spec.cost_curve is None:
        cost = spec.cost @ passes_arr + spec.cost_per_token @ np.asarray(verified, dtype=np.int64).T
    else:
        cost = np.asarray(spent)
    tally = Tally(n1)
    tally.add(StepBatch(tokens, cost, passes_arr, draft, accepted))
    unit = float(spec.cost[0] + spec.cost_per_token[0])
    return SimulationResult(tally, unit, seed, trials, False, seconds)
