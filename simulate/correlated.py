"""Non-i.i.d. acceptance: how wrong is the i.i.d. EWIF when acceptances are correlated?

The paper (and ``ewif``) assume every acceptance test is an independent Bernoulli(α)
trial. Two departures, played through the same engine as :mod:`simulate.bernoulli`:

* :class:`PositionAcceptance` — reviewer ``r`` accepts the token at position ``i`` of its
  draft (1-based, across blocks) with probability ``curves[(r, j)][i−1]`` (the last value
  repeats beyond the curve); pairs without a curve keep ``alpha[r, j]``. Steps stay
  independent, so :func:`simulate.bernoulli.simulate` runs it (``acceptance=``).
* :class:`MarkovAcceptance` — *bursty* text: for each reviewer/drafter pair the sequence
  of tests it performs, within and across target steps, is a stationary two-state Markov
  chain with ``P(accept) = α`` (the same marginal as i.i.d.) and lag-one correlation
  ``ρ``: ``P(accept | last accepted) = α + ρ(1 − α)``, ``P(accept | last rejected) =
  α(1 − ρ)``. Tokens never tested (after a rejection) do not advance the chain. ``ρ = 0``
  is the i.i.d. model; ``ρ`` ranges over ``[max(−α/(1−α), −(1−α)/α), 1)``.

Steps of one stream are dependent under the Markov model, so :func:`simulate_markov`
runs ``streams`` independent streams of ``steps`` target steps each (vectorised across
streams) and estimates EWIF by **batch means** (one batch per stream; delta method on the
stream totals, Student-t quantile). :func:`correlation_report` tabulates exact i.i.d.
EWIF against the simulated EWIF as ``ρ`` grows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ewif.base import validate
from simulate.bernoulli import CascadeSpec, StepPlayer, blockwise, generator
from simulate.estimates import SimulationResult, Tally
from simulate.stats import Estimate, batch_ratio_estimate


@dataclass(frozen=True)
class PositionAcceptance:
    """Acceptance depending on the position in the reviewer's draft (see module doc)."""

    alpha: np.ndarray
    curves: Mapping[tuple[int, int], np.ndarray]

    def __post_init__(self) -> None:
        for (r, j), curve in self.curves.items():
            arr = validate.probabilities(f"curves[({r}, {j})]", curve)
            if arr.ndim != 1 or arr.size == 0:
                raise ValueError(f"curves[({r}, {j})] must be a non-empty 1-D array")

    def accepted(self, r, blocks, steps, rng):
        """Leading acceptances over the draft (see ``AcceptanceProcess``)."""
        return blockwise(self.block, r, blocks, steps, rng)

    def block(self, r, j, steps, offset, length, rng):
        """Leading acceptances of one block (see ``blockwise``)."""
        curve = self.curves.get((r, j))
        if curve is None:
            curve = np.array([self.alpha[r, j]])
        curve = np.asarray(curve, dtype=float)
        width = int(length.max(initial=0))
        if width == 0:
            return np.zeros_like(length)
        pos = offset[:, None] + np.arange(width)[None, :]
        p = curve[np.minimum(pos, curve.size - 1)]
        accept = rng.random(p.shape) < p
        first_reject = np.where(accept.all(axis=1), width, np.argmin(accept, axis=1))
        return np.minimum(first_reject, length).astype(np.int64)


def rho_range(alpha: float) -> tuple[float, float]:
    """Admissible lag-one correlations ``[low, 1)`` of a two-state chain with mean α."""
    if alpha <= 0.0 or alpha >= 1.0:
        return 0.0, 1.0
    return max(-alpha / (1.0 - alpha), -(1.0 - alpha) / alpha), 1.0


class MarkovAcceptance:
    """Bursty acceptance: one stationary two-state chain per (stream, reviewer, drafter)."""

    def __init__(
        self, spec: CascadeSpec, rho: float, streams: int, rng: np.random.Generator
    ) -> None:
        rho = float(rho)
        self.alpha = spec.alpha
        self.rho = rho
        self._state: dict[tuple[int, int], np.ndarray] = {}
        for r in range(spec.n):
            for j in range(r + 1, spec.n + 1):
                a = float(spec.alpha[r, j])
                if spec.K[r, j - 1] == 0 or math.isnan(a):
                    continue
                low, high = rho_range(a)
                if not (low <= rho < high):
                    raise ValueError(
                        f"rho must be in [{low:.6g}, 1) for alpha[{r}][{j}] = {a:g}, got {rho!r}"
                    )
                self._state[(r, j)] = rng.random(streams) < a  # stationary start

    def accepted(self, r, blocks, steps, rng):
        """Leading acceptances over the draft (see ``AcceptanceProcess``)."""
        return blockwise(self.block, r, blocks, steps, rng)

    def block(self, r, j, steps, offset, length, rng):
        """Leading acceptances of one block (see ``blockwise``)."""
        a = float(self.alpha[r, j])
        p11 = a + self.rho * (1.0 - a)
        p01 = a * (1.0 - self.rho)
        state = self._state[(r, j)]
        last = state[steps]
        first = rng.random(steps.size) < np.where(last, p11, p01)
        if p11 >= 1.0:
            more = length.astype(float)
        elif p11 <= 0.0:
            more = np.zeros(steps.size)
        else:
            more = rng.standard_exponential(steps.size) * (-1.0 / math.log(p11))
        run = np.where(first, 1.0 + more, 0.0)
        acc = np.minimum(run, length).astype(np.int64)
        state[steps] = np.where(length == 0, last, acc == length)
        return acc


@dataclass(frozen=True)
class MarkovResult(SimulationResult):
    """A :class:`SimulationResult` whose intervals are batch means over independent streams."""

    rho: float = 0.0
    stream_tokens: np.ndarray = None  # type: ignore[assignment]
    stream_cost: np.ndarray = None  # type: ignore[assignment]
    steps: int = 0

    def ewif(self, level: float = 0.999) -> Estimate:
        e = batch_ratio_estimate(self.stream_tokens, self.stream_cost, level)
        u = self.unit_cost
        return Estimate(e.value * u, e.se * u, e.low * u, e.high * u, level)

    def expected_tokens(self, level: float = 0.999) -> Estimate:
        ones = np.full(self.stream_tokens.size, float(self.steps))
        return batch_ratio_estimate(self.stream_tokens, ones, level)

    def expected_cost(self, level: float = 0.999) -> Estimate:
        ones = np.full(self.stream_cost.size, float(self.steps))
        return batch_ratio_estimate(self.stream_cost, ones, level)


def simulate_markov(
    cascade: Any,
    rho: float,
    streams: int = 2_000,
    steps: int = 100,
    seed: int | None = 0,
    *,
    progress: bool = False,
) -> MarkovResult:
    """``streams`` independent streams of ``steps`` target steps under bursty acceptance.

    Ctrl-C keeps the steps completed by every stream (``interrupted=True``).
    """
    spec = CascadeSpec.of(cascade)
    streams = validate.count("streams", streams, minimum=2)
    steps = validate.count("steps", steps, minimum=1)
    from tqdm.auto import tqdm

    rng = generator(seed)
    engine = StepPlayer(spec, MarkovAcceptance(spec, rho, streams, rng))
    tally = Tally(spec.n + 1)
    tokens = np.zeros(streams)
    cost = np.zeros(streams)
    done = 0
    interrupted = False
    start = time.perf_counter()
    with tqdm(total=steps, unit="round", disable=not progress) as bar:
        try:
            for _ in range(steps):
                batch = engine.run(streams, rng)
                tally.add(batch)
                tokens += batch.tokens
                cost += batch.cost
                done += 1
                bar.update(1)
        except KeyboardInterrupt:
            if done == 0:
                raise
            interrupted = True
    seconds = time.perf_counter() - start
    unit = float(spec.cost[0] + spec.cost_per_token[0])
    return MarkovResult(
        tally,
        unit,
        seed,
        streams,
        interrupted,
        seconds,
        rho=float(rho),
        stream_tokens=tokens,
        stream_cost=cost,
        steps=done,
    )


@dataclass(frozen=True)
class CorrelationRow:
    """Exact i.i.d. EWIF against the simulated EWIF at correlation ``rho``."""

    rho: float
    ewif_iid: float
    simulated: Estimate

    @property
    def relative_error(self) -> float:
        """``(EWIF_iid − EWIF_sim)/EWIF_sim``: how far the i.i.d. prediction is off."""
        return (self.ewif_iid - self.simulated.value) / self.simulated.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "rho": self.rho,
            "ewif_iid": self.ewif_iid,
            "ewif_simulated": self.simulated.to_dict(),
            "relative_error": self.relative_error,
        }


def correlation_report(
    cascade: Any,
    rhos: Iterable[float] = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9),
    streams: int = 2_000,
    steps: int = 100,
    seed: int | None = 0,
    level: float = 0.999,
) -> list[CorrelationRow]:
    """EWIF(i.i.d., exact from ``cascade.ewif()``) vs simulated bursty EWIF for each ρ."""
    exact = float(cascade.ewif())
    rows = []
    for i, rho in enumerate(rhos):
        sub_seed = None if seed is None else seed + i
        result = simulate_markov(cascade, rho, streams, steps, sub_seed)
        rows.append(CorrelationRow(float(rho), exact, result.ewif(level)))
    return rows
