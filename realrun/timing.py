"""Pass-cost curves of real models, timed the way decoding feeds them.

A review pass over a draft of ``D`` tokens feeds ``m = D + 1`` fresh positions onto a
cached context and returns ``m`` logit rows; a generating pass feeds ``m = 1``. On real
hardware the cost of such a pass is a curve in ``m``, not a line: BLAS switches kernels
with the number of rows (on an AVX-512 CPU in float32 a pass over m = 2 costs about two
single passes, then the curve flattens; in bfloat16 it is nearly flat from the start).

:func:`time_family` measures those curves for every model of a cascade the way a decoding
run pays them, in **rounds**:

* every timed pass rolls back the previous pass's tail (a cache crop, as a step after a
  rejection does) and feeds ``m`` fresh positions after a cached context — exactly ``m``:
  after the autoregressive generation and each probe, which may leave a model's cache at
  the prompt (our decoder rolls the target back to it), every model is brought back to the
  round's context outside the clock, or the next pass would refeed the continuation's part
  (up to ``max_new_tokens`` positions, timed as a pass over ``m``);
* the rounds cycle through the measuring prompts, and a round's context is its prompt and a
  uniformly drawn part of its continuation, so the cache lengths are the run's (a run's
  passes fall anywhere between the prompt and the end of its generation), not one
  context's (:attr:`FamilyTiming.contexts` keeps each round's length);
* within a round every ``(model, m)`` pass and one autoregressive generation are timed in
  one shuffled order, so the models' passes **interleave** as a cascade interleaves them
  and a drift of the machine's speed during the measurement hits every model and every
  ``m`` alike (timed one model after the other, a drift of 10–20 % between them went
  straight into their cost ratio);
* after each of the target's passes the decoder's own work on its ``m`` logit rows — the
  verify step of :mod:`simulate.decoder.verify` (greedy: argmax; sampling: the decoding's
  distribution and speculative sampling) — is timed too (:attr:`FamilyTiming.decoder`);
* the **autoregressive reference** is timed **as the run decodes it**: each round, the
  run's own AR method (:mod:`realrun.ar`: transformers' ``generate`` or our decoder with the
  target alone) generates the round's measuring prompt from its prompt, up to the run's
  ``max_new_tokens`` (``ar_tokens``) and its EOS, prompt prefill excluded — the call the run
  makes for every held-out prompt. Its seconds per token over the rounds, ``Σ s / Σ tokens``
  as the run computes it, are the unit of every cost curve
  (:attr:`FamilyTiming.ar_seconds_per_token`), so what AR pays beyond a bare one-token pass
  (its loop, its sampler, ``generate``'s setup once per prompt) is priced as the run pays
  it. The earlier reference decoded 16 tokens after the end of each continuation: a
  context the run never decodes from (after an EOS when the answer had ended, where
  ``generate`` stops within a token or two), in calls half as long as the run's, so its
  per-call setup weighed more (``docs/findings.md``, *The unit*).

Rounds by time. Eight rounds of a 135M model's passes take 20 s and left its curve noisy
(a shared 2-core machine's stalls of tens of milliseconds weigh on 25 ms passes), while
eight rounds of a 1.5B target take minutes: ``min_seconds`` keeps adding rounds while the
timed ones have taken less than that, up to ``max_rounds``, so a cheap family is timed as
long as a costly one's minimum would be, and a costly one is not timed longer.

Every ``m`` is represented by the **mean** of its rounds, with its standard error (the
median is kept beside it). Expected cost is a mean: a decoding run pays the mean of a
heavy-tailed pass-time distribution, which its median under-prices (by 10 % and more on a
shared virtual machine, and not by the same factor at every ``m``); the fastest repeat
under-prices it further. The grid is dense up to 6 and sparser beyond (:func:`grid`); the
dense curve ``m = 1..max_m`` is the linear interpolation between grid points
(:meth:`PassTiming.dense`). ewif extends a curve beyond its last point linearly through its
last two points (never downwards). :func:`time_passes` is the one-model case on one
context (the numerics search's quick bound).

:func:`time_proposer` times Max-Gram's ``propose(prefix, prompt_length, k)`` along a
continuation, as decoding calls it; ewif charges a leaf block of ``k`` tokens as ``k``
generating passes, so its cost is the time per proposed token.

Logit rows. A pass computes the LM head only for the rows it returns, and on a small model
with a large vocabulary that head is a sizeable part of a pass (Qwen2.5 0.5B, 152k tokens:
one row is 4–7.5 % of its two-position pass on llama.cpp). Every curve is timed with all
``m`` rows, as ewif prices it (:mod:`ewif.kernel.pass_cost`, "Logit rows"), and each drafter's
two-position pass once more with one row, paired in the same round: the difference is its
row cost ``h`` (:meth:`FamilyTiming.row_seconds`), which ewif takes off a catch-up drafter's
pass per position that returns no row.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ewif.base import validate
from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.sampling import Decoding
from simulate.decoder.verify import greedy_verify, speculative_verify

#: Times the run's autoregressive decoding of ``n`` tokens after a context (prompt prefill
#: excluded): ``(context, n) -> (tokens decoded, seconds)`` (:mod:`realrun.ar`).
ARTimer = Callable[[Sequence[int], int], tuple[int, float]]

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


#: Times something else in every round of :func:`time_family`, from the round's
#: ``(prompt, continuation)``: ``-> (tokens, seconds)`` (a benchmark's second reference).
Probe = Callable[[Sequence[int], Sequence[int]], tuple[int, float]]


@dataclass(frozen=True)
class FamilyTiming:
    """What :func:`time_family` measured: every neural model's pass timing by ``m``, the
    decoder's work after a target pass returning ``m`` rows (None for a family without a
    timed target), the autoregressive reference per round (tokens, seconds), and every
    drafter's two-position pass returning one row (``one_row``: seconds per round; the
    curve's returns both, module docstring). ``contexts``: each round's cached context
    length of the passes; ``ar_contexts``: each round's prompt length, where its
    autoregressive generation started; ``probes``: any extra timed items per round
    (name -> (tokens, seconds) per round)."""

    passes: dict[str, PassTiming]
    decoder: PassTiming | None
    ar_tokens: tuple[int, ...]
    ar_seconds: tuple[float, ...]
    one_row: dict[str, tuple[float, ...]] = field(default_factory=dict)
    contexts: tuple[int, ...] = ()
    ar_contexts: tuple[int, ...] = ()
    probes: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = field(default_factory=dict)

    def row_seconds(self, name: str) -> tuple[float, float] | None:
        """``(h, se)``: what one more logit row adds to drafter ``name``'s pass — the curve's
        two-position pass (two rows) against the same pass with one, over the same rounds
        (mean of the paired differences and its standard error); None when not timed."""
        one = self.one_row.get(name)
        timing = self.passes.get(name)
        if not one or timing is None or 2 not in timing.m or not timing.samples:
            return None
        both = timing.samples[timing.m.index(2)]
        diff = np.asarray(both[: len(one)], dtype=float) - np.asarray(one, dtype=float)
        se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else 0.0
        return float(diff.mean()), se

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
            {name: rounds + other.one_row.get(name, ()) for name, rounds in self.one_row.items()},
            self.contexts + other.contexts,
            self.ar_contexts + other.ar_contexts,
            probes,
        )


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


def time_family(
    models: Sequence[TokenModel],
    contexts: Sequence[tuple[Sequence[int], Sequence[int]]],
    max_m: int,
    *,
    ar: ARTimer,
    decoding: Decoding,
    rounds: int = 8,
    warmup: int = 1,
    ar_tokens: int = 32,
    probes: Mapping[str, Probe] | None = None,
    seed: int = 0,
    progress: Callable[[], object] | None = None,
    min_seconds: float = 0.0,
    max_rounds: int | None = None,
) -> FamilyTiming:
    """Time every model of ``models`` (target first, neural only) over the grid of
    :func:`grid` ``(max_m)``, with the decoder's verify work after the target's passes and
    the autoregressive reference ``ar`` decoding up to ``ar_tokens`` tokens from the round's
    prompt (as the run decodes each prompt), for ``rounds`` rounds (after ``warmup`` untimed
    ones) cycling through the ``(prompt, continuation)`` pairs of ``contexts``; a round's
    passes run on the prompt and a uniformly drawn part of its continuation (module
    docstring). ``probes`` are timed once a round too; ``progress()`` is called after every
    timed round. While the timed rounds have taken less than ``min_seconds``, more are run,
    up to ``max_rounds`` (default ``4·rounds``): a family whose rounds are cheap gets more
    of them for the same wall time (module docstring, *Rounds by time*)."""
    rounds = validate.count("rounds", rounds, minimum=1)
    warmup = validate.count("warmup", warmup)
    min_seconds = validate.cost("min_seconds", min_seconds)
    cap = 4 * rounds if max_rounds is None else validate.count("max_rounds", max_rounds)
    if cap < rounds:
        raise ValueError(f"max_rounds must be at least rounds ({rounds}), got {cap}")
    plan = _Rounds(
        list(models),
        grid(max_m),
        decoding,
        ar,
        validate.count("ar_tokens", ar_tokens, minimum=1),
        dict(probes or {}),
        seed,
    )
    pairs = [([int(t) for t in p], [int(t) for t in c]) for p, c in contexts]
    if not pairs or not all(p for p, _ in pairs):
        raise ValueError("contexts must hold at least one (prompt, continuation), prompt non-empty")
    r, spent = 0, 0.0
    while r < warmup + rounds or (spent < min_seconds and r < warmup + cap):
        prompt, continuation = pairs[r % len(pairs)]
        start = time.perf_counter()
        plan.run(prompt, continuation, keep=r >= warmup)
        if r >= warmup:
            spent += time.perf_counter() - start
            if progress is not None:
                progress()
        r += 1
    return plan.timing()


class _Rounds:
    """The rounds of :func:`time_family`: what one round times, in a shuffled order, and
    what the timed rounds recorded."""

    def __init__(self, models, ms, decoding, ar, ar_tokens, probes, seed) -> None:
        if not models:
            raise ValueError("models must hold at least the target")
        self.models, self.ms, self.decoding = models, ms, decoding
        self.ar, self.ar_tokens, self.probes = ar, ar_tokens, probes
        self.rng, self.np_rng = random.Random(seed), np.random.default_rng(seed)
        self.seconds: dict[tuple[int, int], list[float]] = {
            (i, m): [] for i in range(len(models)) for m in ms
        }
        self.one_row: dict[int, list[float]] = {i: [] for i in range(1, len(models)) if 2 in ms}
        self.verify: dict[int, list[float]] = {m: [] for m in ms}
        self.ar_n: list[int] = []
        self.ar_s: list[float] = []
        self.contexts: list[int] = []
        self.ar_contexts: list[int] = []
        self.probed: dict[str, tuple[list[int], list[float]]] = {n: ([], []) for n in probes}

    def run(self, prompt: list[int], continuation: list[int], keep: bool) -> None:
        """One round: the curve's passes (all rows), each drafter's one-row two-position
        pass, the autoregressive generation and the probes, in one shuffled order."""
        ctx = prompt + continuation[: self.rng.randint(0, len(continuation))]
        self._at_context(ctx)  # prefill outside the clock, as a run does
        order: list[tuple] = [("pass", i, m, m) for i in range(len(self.models)) for m in self.ms]
        order += [("pass", i, 2, 1) for i in self.one_row]
        order += [("ar",), *(("probe", name) for name in self.probes)]
        self.rng.shuffle(order)
        done = {}
        for item in order:
            done[item] = self._timed(item, ctx, prompt, continuation)
            if item[0] != "pass":  # AR and probes may move a cache: back to ctx, untimed
                self._at_context(ctx)
        if keep:
            self._record(done, len(ctx), len(prompt))

    def _at_context(self, ctx: list[int]) -> None:
        """Every model's cache holding ``ctx`` (a one-token pass each, outside the clock)."""
        for model in self.models:
            model.logits(ctx, 1)

    def _timed(self, item: tuple, ctx, prompt, continuation) -> tuple:
        if item[0] == "ar":
            return self.ar(prompt, self.ar_tokens)
        if item[0] == "probe":
            return self.probes[item[1]](prompt, continuation)
        _, i, m, rows = item
        tokens = ctx + [self.rng.randrange(self.models[0].vocab_size) for _ in range(m)]
        start = time.perf_counter()
        logits = self.models[i].logits(tokens, rows)
        elapsed = time.perf_counter() - start
        if i == 0:
            return elapsed, _verify_seconds(logits, tokens[-m:-1], self.decoding, self.np_rng)
        return elapsed, None

    def _record(self, done: dict, context: int, prompt: int) -> None:
        self.contexts.append(context)
        self.ar_contexts.append(prompt)
        for item, (first, second) in done.items():
            if item[0] == "ar":
                self.ar_n.append(int(first))
                self.ar_s.append(float(second))
            elif item[0] == "probe":
                self.probed[item[1]][0].append(int(first))
                self.probed[item[1]][1].append(float(second))
            elif item[3] != item[2]:
                self.one_row[item[1]].append(first)
            else:
                self.seconds[item[1:3]].append(first)
                if second is not None:
                    self.verify[item[2]].append(second)

    def timing(self) -> FamilyTiming:
        passes = {
            model.name: PassTiming.of(self.ms, [self.seconds[(i, m)] for m in self.ms])
            for i, model in enumerate(self.models)
        }
        return FamilyTiming(
            passes,
            PassTiming.of(self.ms, [self.verify[m] for m in self.ms]),
            tuple(self.ar_n),
            tuple(self.ar_s),
            {self.models[i].name: tuple(v) for i, v in self.one_row.items()},
            tuple(self.contexts),
            tuple(self.ar_contexts),
            {n: (tuple(v[0]), tuple(v[1])) for n, v in self.probed.items()},
        )


def _verify_seconds(
    logits: np.ndarray, draft: list[int], decoding: Decoding, rng: np.random.Generator
) -> float:
    """Wall time of the decoder's review of ``draft`` against a pass's ``logits`` (greedy:
    :func:`greedy_verify`; sampling: the distribution, then :func:`speculative_verify` with
    point-mass draft laws)."""
    start = time.perf_counter()
    if decoding.greedy:
        greedy_verify(draft, logits, 1.0)
    else:
        speculative_verify(draft, [None] * len(draft), decoding.probs(logits), 1.0, rng, False)
    return time.perf_counter() - start


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
