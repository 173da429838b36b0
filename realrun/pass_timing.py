"""What a timing measured: the pass timings of one model by ``m`` on the grid of timed sizes,
and a family's interleaved rounds (its passes, the decoder's work, the autoregressive unit and
the drafters' passes with one and two logit rows) — the records :func:`realrun.timing.time_family`
returns and the cost curves are built from (how they are timed: :mod:`realrun.timing`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ewif.base import validate

_DENSE_UP_TO = 6


def grid(max_m: int) -> tuple[int, ...]:
    """The timed ``m`` values: ``1..6`` densely, then every 2 up to 12, every 4 up to 32,
    every 8 beyond; ``max_m`` always included."""
    max_m = validate.count("max_m", max_m, minimum=1)
    points = set(range(1, min(max_m, _DENSE_UP_TO) + 1))
    m = _DENSE_UP_TO
    while m < max_m:
        m += 2 if m < 12 else 4 if m < 32 else 8
        points.add(min(m, max_m))
    return tuple(sorted(points))


@dataclass(frozen=True)
class PassTiming:
    """Mean seconds of one pass per timed ``m`` (``m`` ascending, starting at 1), with the
    standard error of each mean and the median (empty when not measured); ``samples`` keeps
    the repeated pass times behind them (not stored in files), so that more rounds can be
    added later (:meth:`merged`)."""

    m: tuple[int, ...]
    seconds: tuple[float, ...]
    stderr: tuple[float, ...] = ()
    median: tuple[float, ...] = ()
    samples: tuple[tuple[float, ...], ...] = field(default=(), repr=False, compare=False)

    @classmethod
    def of(cls, m: Sequence[int], samples: Sequence[Sequence[float]]) -> PassTiming:
        """From the repeated pass times ``samples[i]`` of ``m[i]`` (seconds, >= 0)."""
        if len(m) != len(samples):
            raise ValueError(f"need one list of pass times per m ({len(m)}), got {len(samples)}")
        means, errors, medians = [], [], []
        for size, values in zip(m, samples, strict=True):
            v = np.asarray(values, dtype=float)
            if v.size == 0 or not np.isfinite(v).all() or (v < 0).any():
                raise ValueError(
                    f"pass times at m = {size} must be a non-empty list of seconds "
                    f">= 0, got {list(values)!r}"
                )
            means.append(float(v.mean()))
            errors.append(float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0)
            medians.append(float(np.median(v)))
        kept = tuple(tuple(float(x) for x in values) for values in samples)
        return cls(tuple(int(x) for x in m), tuple(means), tuple(errors), tuple(medians), kept)

    def merged(self, other: PassTiming) -> PassTiming:
        """The timing of both measurements' repeats together (same ``m`` grid, both with
        their samples): more rounds of the same passes."""
        if self.m != other.m or not self.samples or not other.samples:
            raise ValueError(
                f"can merge only timings of one m grid that keep their samples, got m = "
                f"{list(self.m)} and {list(other.m)}"
            )
        pooled = [a + b for a, b in zip(self.samples, other.samples, strict=True)]
        return PassTiming.of(self.m, pooled)

    def dense(self) -> np.ndarray:
        """Seconds for ``m = 1..max(m)``, linearly interpolated between timed points."""
        return np.interp(np.arange(1, self.m[-1] + 1), self.m, self.seconds)

    def to_dict(self) -> dict:
        out = {"m": list(self.m), "seconds": list(self.seconds)}
        if self.stderr:
            out["stderr_seconds"] = list(self.stderr)
        if self.median:
            out["median_seconds"] = list(self.median)
        return out


@dataclass(frozen=True)
class FamilyTiming:
    """What :func:`realrun.timing.time_family` measured: every neural model's pass timing by
    ``m``, the decoder's work after a target pass returning ``m`` rows (None for a family without a
    timed target), the autoregressive reference per round (tokens, seconds), and every
    drafter's pass over ``rows_m`` positions returning ``r`` rows for ``r`` in 1, 2 and
    ``rows_m`` (``rows[name][r]``: the mean seconds of its repeats in each round,
    :mod:`realrun.timing`). ``contexts``: each round's cached context
    length of the passes; ``ar_contexts``: each round's prompt length, where its
    autoregressive generation started; ``probes``: any extra timed items per round
    (name -> (tokens, seconds) per round)."""

    passes: dict[str, PassTiming]
    decoder: PassTiming | None
    ar_tokens: tuple[int, ...]
    ar_seconds: tuple[float, ...]
    rows: dict[str, dict[int, tuple[float, ...]]] = field(default_factory=dict)
    contexts: tuple[int, ...] = ()
    ar_contexts: tuple[int, ...] = ()
    probes: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = field(default_factory=dict)
    rows_m: int = 2

    def row_seconds(self, name: str) -> tuple[float, float] | None:
        """``(h, se)``: what each logit row beyond the second adds to drafter ``name``'s pass,
        ``(t(M, M) − t(M, 2))/(M − 2)`` per round (``M`` = :attr:`rows_m`; at ``M = 2``
        ``t(2, 2) − t(2, 1)``, the second row's whole cost), the mean over rounds of the
        paired differences and its standard error; None when not timed."""
        rounds = self._row_rounds(name)
        return None if rounds is None else _mean_se(rounds[0])

    def row_step_seconds(self, name: str) -> tuple[float, float] | None:
        """``(s, se)``: what the second logit row adds beyond :meth:`row_seconds`' ``h``,
        ``t(M, 2) − t(M, 1) − h`` per round (:mod:`realrun.timing`); None when not timed or at
        ``M = 2`` (no step is then measured)."""
        rounds = self._row_rounds(name)
        return None if rounds is None or self.rows_m <= 2 else _mean_se(rounds[1])

    def _row_rounds(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``(h, s)`` of drafter ``name`` round by round, from its passes over :attr:`rows_m`
        positions with one row, two and all (:meth:`row_seconds`, :meth:`row_step_seconds`;
        at ``rows_m = 2`` ``h`` is the second row's whole cost and ``s`` is 0); None when not
        timed."""
        by_rows = self.rows.get(name) or {}
        if not by_rows.get(1):
            return None
        one, two, full = (np.asarray(by_rows[r], dtype=float) for r in (1, 2, self.rows_m))
        m = self.rows_m
        h = (full - two) / (m - 2) if m > 2 else two - one
        return h, two - one - h

    @property
    def ar_seconds_per_token(self) -> float:
        """Seconds per token of the autoregressive reference over all rounds (the unit of
        the cost curves): ``Σ seconds / Σ tokens``, as a run computes tokens/s."""
        return per_token(self.ar_tokens, self.ar_seconds)[0]

    @property
    def ar_stderr(self) -> float:
        """Standard error of :attr:`ar_seconds_per_token` over rounds (ratio estimator)."""
        return per_token(self.ar_tokens, self.ar_seconds)[1]

    def merged(self, other: FamilyTiming) -> FamilyTiming:
        """Both measurements' rounds together (same models and grid)."""
        if list(self.passes) != list(other.passes):
            raise ValueError(
                f"can merge only timings of the same models, got {list(self.passes)} and "
                f"{list(other.passes)}"
            )
        decoder = (
            self.decoder.merged(other.decoder)
            if self.decoder is not None and other.decoder is not None
            else None
        )
        probes = {
            name: (n + other.probes[name][0], s + other.probes[name][1])
            for name, (n, s) in self.probes.items()
            if name in other.probes
        }
        return FamilyTiming(
            {name: t.merged(other.passes[name]) for name, t in self.passes.items()},
            decoder,
            self.ar_tokens + other.ar_tokens,
            self.ar_seconds + other.ar_seconds,
            {
                name: {r: v + other.rows[name][r] for r, v in by_rows.items()}
                for name, by_rows in self.rows.items()
            },
            self.contexts + other.contexts,
            self.ar_contexts + other.ar_contexts,
            probes,
            self.rows_m,
        )


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    """Mean of paired differences over rounds and its standard error."""
    se = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else 0.0
    return float(x.mean()), se


def per_token(tokens: Sequence[int], seconds: Sequence[float]) -> tuple[float, float]:
    """``(Σ seconds / Σ tokens, its standard error over the rounds)`` (ratio estimator)."""
    n = np.asarray(tokens, dtype=float)
    s = np.asarray(seconds, dtype=float)
    if n.sum() <= 0:
        raise ValueError("the autoregressive reference decoded no tokens while timed")
    unit = float(s.sum() / n.sum())
    if n.size < 2:
        return unit, 0.0
    resid = s - unit * n
    return unit, float(np.sqrt((resid**2).sum() / (n.size - 1) / n.size) / n.mean())
