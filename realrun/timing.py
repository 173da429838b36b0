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
  context's (``FamilyTiming.contexts`` keeps each round's length);
* a round's context is prefilled outside the clock; a model with a prefix store
  (:mod:`realrun.prefix_store`) starts from its copy of a prompt seen before instead;
* within a round every ``(model, m)`` pass and one autoregressive generation are timed in
  one shuffled order, so the models' passes **interleave** as a cascade interleaves them
  and a drift of the machine's speed during the measurement hits every model and every
  ``m`` alike (timed one model after the other, a drift of 10–20 % between them went
  straight into their cost ratio);
* after each of the target's passes the decoder's own work on its ``m`` logit rows — the
  verify step of :mod:`simulate.decoder.verify` (greedy: argmax; sampling: the decoding's
  distribution and speculative sampling) — is timed too (``FamilyTiming.decoder``);
* the **autoregressive reference** is timed **as the run decodes it**: each round, the
  run's own AR method (:mod:`realrun.ar`: transformers' ``generate`` or our decoder with the
  target alone) generates the round's measuring prompt from its prompt, up to the run's
  ``max_new_tokens`` (``ar_tokens``) and its EOS, prompt prefill excluded — the call the run
  makes for every held-out prompt. Its seconds per token over the rounds, ``Σ s / Σ tokens``
  as the run computes it, are the unit of every cost curve
  (``FamilyTiming.ar_seconds_per_token``), so what AR pays beyond a bare one-token pass
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
(``PassTiming.dense``). ewif extends a curve beyond its last point linearly through its
last two points (never downwards). :func:`time_passes` is the one-model case on one
context (the numerics search's quick bound).

:func:`time_proposer` times Max-Gram's ``propose(prefix, prompt_length, k)`` along a
continuation, as decoding calls it; ewif charges a leaf block of ``k`` tokens as ``k``
generating passes, so its cost is the time per proposed token.

Logit rows. A pass computes the LM head only for the rows it returns, and on a small model
with a large vocabulary that head is a sizeable part of a pass (Qwen2.5 0.5B, 152k tokens:
one row is 4–7.5 % of its two-position pass on llama.cpp). Every curve is timed with all
``m`` rows, as ewif prices it (:mod:`ewif.kernel.pass_cost`, "Logit rows"), and each drafter's
pass over ``M = min(ROWS_M, max m)`` positions with one row, two and all ``M``,
:data:`ROW_REPEATS` times each in every round (one row differs by a few ms on passes that
scatter by more), paired by round. The rows' cost is not a line: on llama.cpp on an AMD EPYC the
second row costs 7–9 ms of the 0.5B's Q8_0 head and the third and fourth almost nothing
(``benchmarks/row_cost_shapes.py``), so ewif prices rows as a step and a slope — the second
row ``s + h``, every further row ``h`` — and the three passes give both per round:
``h = (t(M, M) − t(M, 2))/(M − 2)`` (``FamilyTiming.row_seconds``) and
``s = t(M, 2) − t(M, 1) − h`` (``FamilyTiming.row_step_seconds``). With ``M = 2`` only
``s + h`` is timed: it is priced as ``h``, with no step, as before.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ewif.base import validate
from realrun.pass_timing import FamilyTiming, PassTiming, grid
from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.sampling import Decoding
from simulate.decoder.verify import greedy_verify, speculative_verify

#: Times the run's autoregressive decoding of ``n`` tokens after a context (prompt prefill
#: excluded): ``(context, n) -> (tokens decoded, seconds)`` (:mod:`realrun.ar`).
ARTimer = Callable[[Sequence[int], int], tuple[int, float]]

#: Positions of the drafters' passes with one and two logit rows (module docstring; the
#: records, ``FamilyTiming`` and ``PassTiming``, are in :mod:`realrun.pass_timing`).
ROWS_M = 4
#: Timings per round of each of those passes (and of the all-rows one beside them): a row
#: differs by a few ms on passes that scatter by more from round to round.
ROW_REPEATS = 3


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
        self.rows_m = max((m for m in ms if m <= ROWS_M), default=1)
        drafters = range(1, len(models)) if self.rows_m >= 2 else ()
        self.row_means: dict[tuple[int, int], list[float]] = {
            (i, r): [] for i in drafters for r in sorted({1, 2, self.rows_m})
        }
        self.verify: dict[int, list[float]] = {m: [] for m in ms}
        self.ar_n: list[int] = []
        self.ar_s: list[float] = []
        self.contexts: list[int] = []
        self.ar_contexts: list[int] = []
        self.probed: dict[str, tuple[list[int], list[float]]] = {n: ([], []) for n in probes}

    def run(self, prompt: list[int], continuation: list[int], keep: bool) -> None:
        """One round: the curve's passes (all rows), each drafter's passes over ``rows_m``
        positions with 1, 2 and all rows (:data:`ROW_REPEATS` each), the autoregressive
        generation and the probes, in one shuffled order."""
        ctx = prompt + continuation[: self.rng.randint(0, len(continuation))]
        self._at_context(ctx)  # prefill outside the clock, as a run does
        order: list[tuple] = [("pass", i, m, m) for i in range(len(self.models)) for m in self.ms]
        order += [
            ("pass", i, self.rows_m, r, k) for i, r in self.row_means for k in range(ROW_REPEATS)
        ]
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
        _, i, m, rows = item[:4]
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
        repeats: dict[tuple[int, int], list[float]] = {key: [] for key in self.row_means}
        for item, (first, second) in done.items():
            if item[0] == "ar":
                self.ar_n.append(int(first))
                self.ar_s.append(float(second))
            elif item[0] == "probe":
                self.probed[item[1]][0].append(int(first))
                self.probed[item[1]][1].append(float(second))
            elif len(item) == 5:  # a drafter's pass with 1, 2 or all rows
                repeats[(item[1], item[3])].append(first)
            else:
                self.seconds[item[1:3]].append(first)
                if second is not None:
                    self.verify[item[2]].append(second)
        for key, values in repeats.items():
            self.row_means[key].append(float(np.mean(values)))

    def timing(self) -> FamilyTiming:
        rows: dict[str, dict[int, tuple[float, ...]]] = {}
        for (i, r), v in self.row_means.items():
            rows.setdefault(self.models[i].name, {})[r] = tuple(v)
        passes = {
            model.name: PassTiming.of(self.ms, [self.seconds[(i, m)] for m in self.ms])
            for i, model in enumerate(self.models)
        }
        return FamilyTiming(
            passes,
            PassTiming.of(self.ms, [self.verify[m] for m in self.ms]),
            tuple(self.ar_n),
            tuple(self.ar_s),
            rows,
            tuple(self.contexts),
            tuple(self.ar_contexts),
            {n: (tuple(v[0]), tuple(v[1])) for n, v in self.probed.items()},
            self.rows_m,
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
