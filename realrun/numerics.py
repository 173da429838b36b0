"""Choose the numerics (dtype and CPU threads) of a family by measurement, in minutes.

CPUs differ (AVX-512 with bf16 instructions make a bfloat16 review pass nearly as cheap as
a one-token pass; an AVX2-only CPU emulates bfloat16 slowly), so nothing is assumed: every
candidate ``(dtype, threads)`` — dtypes float32, bfloat16, float16 (:data:`CPU_DTYPES`),
threads ``1..cores`` — competes on its **score**, the predicted throughput

    score = max(EWIF*, 1) / t_AR   tokens/s,

the recommended configuration's exact EWIF (autoregressive decoding when nothing beats it)
over the seconds of one autoregressive token as the run decodes it (:mod:`realrun.ar`). The
winner is the highest-scoring *eligible* candidate: the target's argmax of a pass over
``m`` positions agrees with ``m`` single passes on at least ``min_agreement`` of the checked
positions (:mod:`realrun.invariance`; greedy speculative decoding is lossless only then).
On a GPU ``"auto"`` is bfloat16 (float16 where unsupported) and is not measured; the
llama.cpp backend has one dtype, the file's own, so only the thread count is searched.

Measuring every candidate in full (α, a cost curve, batch invariance) took 12.5 min for a
0.5B model here (11.7 min with the interleaved harness), 16 min on an AVX2 machine. The
search below reaches the same winner with far less work, in five stages
(:func:`measure_numerics`):

0. **A quick look, then the most promising first.** Every candidate's target is timed on
   two passes (``m = 1, 2``, ``screen_repeats`` rounds, on the first measuring prompt); the
   candidates are then taken fastest first (the dtypes in the order of their fastest
   candidate, so each is loaded once), so the first one measured in full is usually the one
   to beat and the others stop at the cheap stages below.
1. **α once.** Acceptance is measured in the first candidate's dtype only and every
   candidate is scored with it: the dtypes differ in what a pass costs, not (beyond
   rounding) in what the models predict. If another dtype wins, α is measured again in that
   dtype, so the model set's α is always measured in the numerics it describes.
2. **A bound from the quick look.** No configuration can beat

       U = 1 / ((1 − α_max) · min(t_0(1), t_0(2)))   tokens/s,

   since a step makes at most ``Σ_i α_max^i < 1/(1 − α_max)`` tokens (``α_max`` the largest
   acceptance the target grants any drafter — the α ewif prices; tested against the
   recommendation on random sets) and pays at least one target pass, which costs no less
   than ``min(t_0(1), t_0(2))`` (the curve does not dip below its first two points; it
   rises with ``m`` beyond them). A candidate with ``U`` below the best confirmed score
   cannot win and stops here.
3. **A short curve.** Survivors get cost curves of every model from ``screen_repeats``
   rounds (after the warm-up). A candidate whose score from them falls more than
   ``margin`` below the best confirmed score stops here.
4. **Confirmed.** The rest get the remaining ``repeats − screen_repeats`` rounds (pooled
   with the first: the same measurement as a full one) and their final score. Batch
   invariance is checked last, in order of score, until one candidate is eligible.

``exhaustive=True`` measures every candidate in full (the baseline of
``benchmarks/numerics_search.py``).
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from tqdm.auto import tqdm

from ewif.base import validate
from ewif.files.model_set import ModelSet
from ewif.search.recommendation import Recommendation, recommend
from realrun.ar import ar_timer
from realrun.family import Family, load_family, set_threads
from realrun.invariance import Invariance, batch_invariance
from realrun.loading import select_device
from realrun.measure import (
    Acceptance,
    Costs,
    assemble_model_set,
    check_models,
    measure_acceptance,
    measure_costs,
)
from realrun.methods import recommendation_record
from realrun.prompts import Prompt, encode
from realrun.timing import time_passes
from simulate.decoder.sampling import Decoding

CPU_DTYPES = ("float32", "bfloat16", "float16")
#: How each candidate's search ended (module docstring, stages 2–4).
STAGES = ("bound", "short curve", "confirmed")


@dataclass(frozen=True)
class NumericsTrial:
    """One numerics candidate and how far the search took it: ``stage`` is where it stopped
    (:data:`STAGES`); ``score`` is the bound ``U`` at stage ``"bound"``, else the predicted
    tokens/s of ``recommendation``; ``ar_token_s`` the seconds of one autoregressive token
    (at stage ``"bound"`` the target's one-token pass, a lower bound of it);
    ``invariance`` is None where it was not checked."""

    dtype: str
    threads: int
    ar_token_s: float
    stage: str
    score: float
    recommendation: Recommendation | None = None
    invariance: Invariance | None = None
    min_agreement: float = 0.99

    @property
    def eligible(self) -> bool | None:
        """Batch invariance at least ``min_agreement`` (None: not checked)."""
        return None if self.invariance is None else self.invariance.rate >= self.min_agreement

    @property
    def label(self) -> str:
        return f"{self.dtype} × {self.threads} thread{'s' * (self.threads != 1)}"

    def to_dict(self) -> dict:
        out: dict = {
            "dtype": self.dtype,
            "threads": self.threads,
            "ar_seconds_per_token": self.ar_token_s,
            "stage": self.stage,
            ("upper_bound_tokens_per_s" if self.stage == "bound" else "predicted_tokens_per_s"): (
                self.score
            ),
        }
        if self.recommendation is not None:
            out["recommendation"] = recommendation_record(self.recommendation)
        if self.invariance is not None:
            out["batch_invariance"] = self.invariance.to_dict()
            out["eligible"] = self.eligible
        return out


@dataclass
class Measured:
    """What the measuring split produced: the family (in the chosen numerics), its model set,
    the numerics trials (empty when numerics were given), the chosen thread count and the
    two-line account of the choice (empty when given)."""

    family: Family
    model_set: ModelSet
    trials: list[NumericsTrial]
    threads: int
    summary: tuple[str, ...] = ()


@dataclass
class _Candidate:
    """A confirmed candidate while the search runs (its family is released unless it leads)."""

    trial: NumericsTrial
    costs: Costs
    family: Family | None


def alpha_max(acceptance: Acceptance, n_models: int) -> float:
    """The largest acceptance the target grants any drafter: the largest mean α of its row,
    the α ewif prices (stage 2 of the module docstring)."""
    return float(np.nanmax(acceptance.alpha(n_models)[1.0][0, 1:]))


def throughput_bound(a_max: float, one: float, two: float) -> float:
    """``U = 1 / ((1 − α_max) · min(t(1), t(2)))`` tokens/s; ``inf`` when ``α_max = 1``."""
    floor = min(one, two)
    if a_max >= 1.0 or floor <= 0:
        return float("inf")
    return 1.0 / ((1.0 - a_max) * floor)


def _score(rec: Recommendation, ar_token_s: float) -> float:
    return max(rec.ewif, 1.0) / ar_token_s


def measure_numerics(
    sources: Sequence[str],
    measuring: list[Prompt],
    *,
    mag: bool,
    bigram: str | None,
    device: str,
    dtype: str,
    threads: int | str,
    max_new_tokens: int,
    leniences: Sequence[float],
    decoding: Decoding,
    k_max: int,
    max_m: int | None = None,
    repeats: int = 10,
    warmup: int = 1,
    screen_repeats: int = 2,
    exhaustive: bool = False,
    margin: float = 0.15,
    min_agreement: float = 0.99,
    invariance_positions: int = 48,
    names: Sequence[str] | None = None,
    progress: bool = True,
    backend: str = "transformers",
) -> Measured:
    """Measure the family on the measuring split, choosing dtype and threads when ``"auto"``
    on a CPU by the staged search of the module docstring; returns the family loaded in the
    chosen numerics with its model set (α measured in those numerics)."""
    min_agreement = validate.probability("min_agreement", min_agreement)
    margin = validate.probability("margin", margin)
    repeats = validate.count("repeats", repeats, minimum=1)
    screen_repeats = min(validate.count("screen_repeats", screen_repeats, minimum=1), repeats)
    max_m = 2 * k_max if max_m is None else validate.count("max_m", max_m, minimum=1)
    on_cpu = backend == "llama.cpp" or select_device(device).type == "cpu"
    if threads == "auto":
        cores = os.cpu_count() or 1
        counts = tuple(range(cores, 0, -1)) if on_cpu else (torch.get_num_threads(),)
    else:
        counts = (validate.count("threads", threads, minimum=1),)
    dtypes = CPU_DTYPES if (dtype == "auto" and on_cpu and backend == "transformers") else (dtype,)
    started = time.perf_counter()

    def load(name: str) -> Family:
        return load_family(
            sources, mag=mag, bigram=bigram, device=device, dtype=name, names=names, backend=backend
        )

    def acceptance_of(family: Family) -> Acceptance:
        set_threads(family, max(counts))
        return measure_acceptance(
            family.chain,
            [encode(p, family.tokenizer) for p in measuring],
            max_new_tokens=max_new_tokens,
            leniences=leniences,
            decoding=decoding,
            eos_token_id=family.tokenizer.eos_token_id,
            progress=progress,
        )

    def costs_of(family: Family, rounds: int, rounds_warmup: int, seed: int) -> Costs:
        return measure_costs(
            family.chain,
            acceptance.contexts,
            max_m=max_m,
            ar=ar_timer(family.chain[0], decoding, family.tokenizer.eos_token_id, seed),
            decoding=decoding,
            repeats=rounds,
            warmup=rounds_warmup,
            seed=seed,
            progress=progress,
        )

    def assembled(family: Family, costs: Costs, t: int) -> ModelSet:
        return assemble_model_set(
            check_models(family.chain),
            acceptance,
            costs,
            metadata={"dtype": family.dtype, "threads": t},
        )

    trials: list[NumericsTrial] = []
    confirmed: list[_Candidate] = []
    acceptance: Acceptance | None = None
    a_max, alpha_dtype = 0.0, ""
    candidates = [(d, t) for d in dtypes for t in counts]
    quick: dict[tuple[str, int], tuple[float, float]] = {}
    loaded: dict[str, Family] = {}  # the family in use (at most one besides the leader)

    def family_of(name: str) -> Family:
        if name not in loaded:
            loaded.clear()
            gc.collect()
            loaded[name] = load(name)
        return loaded[name]

    if len(candidates) > 1 and not exhaustive:  # stage 0: a quick look, fastest first
        for name in dtypes:
            family = family_of(name)
            context = encode(measuring[0], family.tokenizer)
            for t in counts:
                set_threads(family, t)
                two = time_passes(family.chain[0], context, 2, screen_repeats, warmup)
                quick[(name, t)] = (two.seconds[0], two.seconds[1])
        fastest = {d: min(min(quick[(d, t)]) for t in counts) for d in dtypes}
        # the fastest dtype first (one load per dtype), fastest thread count first within it
        candidates.sort(key=lambda c: (fastest[c[0]], min(quick[c])))
    bar = tqdm(candidates, desc="numerics", unit="candidate", disable=not progress)
    for name, t in bar:
        family = family_of(name)
        if acceptance is None:
            acceptance = acceptance_of(family)
            a_max, alpha_dtype = alpha_max(acceptance, len(family.chain)), family.dtype
        set_threads(family, t)
        best = max((c.trial.score for c in confirmed), default=0.0)
        if confirmed and (name, t) in quick:
            one, two = quick[(name, t)]
            bound = throughput_bound(a_max, one, two)
            if bound < best:
                trials.append(NumericsTrial(family.dtype, t, one, "bound", bound))
                continue
        costs = costs_of(family, screen_repeats, warmup, seed=0)
        rec = recommend(assembled(family, costs, t), k_max=k_max)
        score = _score(rec, costs.unit_seconds)
        if score < (1.0 - margin) * best and not exhaustive:
            unit = costs.unit_seconds
            trials.append(NumericsTrial(family.dtype, t, unit, "short curve", score, rec))
            continue
        if repeats > screen_repeats:
            costs = costs.merged(costs_of(family, repeats - screen_repeats, 0, seed=1))
        rec = recommend(assembled(family, costs, t), k_max=k_max)
        unit = costs.unit_seconds
        trial = NumericsTrial(
            family.dtype, t, unit, "confirmed", _score(rec, unit), rec, None, min_agreement
        )
        confirmed.append(_Candidate(trial, costs, family))
        top = max(confirmed, key=lambda c: c.trial.score)
        for c in confirmed:
            if c.trial.dtype != top.trial.dtype:
                c.family = None
    assert acceptance is not None and confirmed
    chosen = _first_eligible(confirmed, acceptance, load, invariance_positions, exhaustive)
    trials += [c.trial for c in confirmed]
    family, costs, trial = chosen.family, chosen.costs, chosen.trial
    assert family is not None
    if family.dtype != alpha_dtype:
        acceptance = acceptance_of(family)
    set_threads(family, trial.threads)
    model_set = assembled(family, costs, trial.threads)
    if family.dtype != alpha_dtype:
        rec = recommend(model_set, k_max=k_max)
        final = replace(trial, recommendation=rec, score=_score(rec, trial.ar_token_s))
        trials = [final if t is trial else t for t in trials]
        trial = final
    searched = len(trials) > 1
    summary = _summary(trial, trials, time.perf_counter() - started) if searched else ()
    meta = {
        **model_set.metadata,
        "batch_invariance": None if trial.invariance is None else trial.invariance.to_dict(),
        "numerics_trials": [t.to_dict() for t in trials] if searched else [],
        "numerics_choice": "\n".join(summary) if searched else "given",
    }
    return Measured(
        family,
        replace(model_set, metadata=meta),
        trials if searched else [],
        trial.threads,
        summary,
    )


def _first_eligible(
    confirmed: list[_Candidate],
    acceptance: Acceptance,
    load: Callable[[str], Family],
    positions: int,
    every: bool = False,
) -> _Candidate:
    """Stage 4's last step: check batch invariance in order of score until a candidate is
    eligible (``every``: check them all); the first eligible one, else the highest
    agreement."""
    chosen = None
    for c in sorted(confirmed, key=lambda c: -c.trial.score):
        if c.family is None:
            c.family = next(
                (o.family for o in confirmed if o.family and o.trial.dtype == c.trial.dtype),
                None,
            ) or load(c.trial.dtype)
        set_threads(c.family, c.trial.threads)
        inv = batch_invariance(c.family.chain[0], acceptance.contexts, m=4, max_positions=positions)
        c.trial = replace(c.trial, invariance=inv)
        if c.trial.eligible and chosen is None:
            chosen = c
            if not every:
                break
    if chosen is not None:
        return chosen
    return max(confirmed, key=lambda c: c.trial.invariance.rate)


def _summary(chosen: NumericsTrial, trials: list[NumericsTrial], seconds: float) -> tuple[str, str]:
    """Two lines: what was chosen (score, recommendation, invariance) and why (how many
    candidates each stage ruled out, the runner-up)."""
    rec, inv = chosen.recommendation, chosen.invariance
    assert rec is not None and inv is not None
    what = rec.best.describe() if rec.decision == "speculative" else "autoregressive decoding"
    first = (
        f"numerics: {chosen.label}, predicted {chosen.score:.2f} tokens/s ({what}, EWIF "
        f"{max(rec.ewif, 1.0):.3f}); batch invariance {inv.agreements}/{inv.positions}"
        + ("" if chosen.eligible else " (none eligible: highest agreement taken)")
    )
    by_stage = {s: [t for t in trials if t.stage == s] for s in STAGES}
    others = [t for t in by_stage["confirmed"] if t is not chosen]
    runner = max(others, key=lambda t: t.score, default=None)
    second = (
        f"why: {len(trials)} candidates in {seconds:.0f} s; {len(by_stage['bound'])} ruled out "
        f"by the two-pass bound, {len(by_stage['short curve'])} by a short curve"
        + (
            f"; runner-up {runner.label} at {runner.score:.2f} tokens/s"
            if runner is not None
            else ""
        )
    )
    return first, second
