"""Pass-cost curves of real models, timed the way decoding feeds them.

A review pass over a draft of ``D`` tokens feeds ``m = D + 1`` fresh positions onto a
cached context and returns ``m`` logit rows; a generating pass feeds ``m = 1``. On real
hardware the cost of such a pass is a curve in ``m``, not a line: BLAS switches kernels
with the number of rows (on an AVX-512 CPU in float32 a pass over m = 2 costs about two
single passes, then the curve flattens; in bfloat16 it is nearly flat from the start).

:func:`time_passes` measures that curve for a :class:`~simulate.decoder.interface.TokenModel`
the way decoding runs it: every timed pass rolls back the previous pass's tail (a cache crop,
as a step after a rejection does) and feeds ``m`` fresh positions after the same cached
context; after a warm-up round, ``repeats`` rounds time every ``m`` of a grid in a shuffled
order and the **mean** represents each ``m``, with its standard error (the median and the
fastest repeat are kept beside it). Expected cost is a mean: a decoding run pays the mean of
a heavy-tailed pass-time distribution, which its median under-prices (by 10 % and more on a
shared virtual machine, and not by the same factor at every ``m``); the fastest repeat
under-prices it further (a one-token pass there typically takes 20–35 % longer than its
fastest repeat). The grid is dense up to 6 and sparser beyond (:func:`grid`);
the dense curve ``m = 1..max_m`` is the linear interpolation between
grid points (:meth:`PassTiming.dense`). ewif extends a curve beyond its last point linearly
through its last two points (never downwards).

:func:`time_proposer` times Max-Gram's ``propose(prefix, prompt_length, k)`` along a
continuation, as decoding calls it; ewif charges a leaf block of ``k`` tokens as ``k``
generating passes, so its cost is the time per proposed token.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ewif import validate
from simulate.decoder.interface import Proposer, TokenModel

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


def time_passes(
    model: TokenModel,
    context: Sequence[int],
    max_m: int,
    repeats: int = 5,
    warmup: int = 1,
    seed: int = 0,
) -> PassTiming:
    """Mean wall time (and its standard error) of one decoding-like pass of ``model``
    feeding ``m`` fresh tokens after the cached ``context``, for every ``m`` of :func:`grid`
    ``(max_m)`` (module docstring)."""
    ms = grid(max_m)
    repeats = validate.count("repeats", repeats, minimum=1)
    warmup = validate.count("warmup", warmup)
    ctx = [int(t) for t in context]
    if not ctx:
        raise ValueError("context must hold at least one token")
    rng = random.Random(seed)
    vocab = model.vocab_size

    def timed(m: int) -> float:
        """Roll back the previous pass's tail (a cache crop, as after a rejection) and feed
        ``m`` fresh positions after the context, returning their logits."""
        tokens = ctx + [rng.randrange(vocab) for _ in range(m)]
        start = time.perf_counter()
        model.logits(tokens, m)
        return time.perf_counter() - start

    model.logits(ctx, 1)
    for _ in range(warmup):
        for m in ms:
            timed(m)
    seconds: dict[int, list[float]] = {m: [] for m in ms}
    for _ in range(repeats):
        order = list(ms)
        rng.shuffle(order)
        for m in order:
            seconds[m].append(timed(m))
    return PassTiming.of(ms, [seconds[m] for m in ms])


def time_proposer(proposer: Proposer, context: Sequence[int], prompt_length: int, k: int) -> float:
    """Seconds per proposed token of ``propose(prefix, prompt_length, k)`` over the prefixes
    of ``context`` after the prompt, walked forward as decoding does (the proposer's
    incremental state updates included)."""
    k = validate.count("k", k, minimum=1)
    ctx = [int(t) for t in context]
    ends = range(prompt_length + 1, len(ctx) + 1)
    if not ends:
        raise ValueError("context must extend past the prompt to time a proposer")
    start = time.perf_counter()
    for end in ends:
        proposer.propose(ctx[:end], prompt_length, k)
    return (time.perf_counter() - start) / (len(ends) * k)
