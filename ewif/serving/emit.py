"""The best plain-drafting configuration a serving engine can express, priced exactly, rendered
in the engine's own format (``csd recommend --emit ENGINE``).

Engines run plain drafting (:mod:`ewif.serving.engines`), so the candidates are the model
set's drafters one at a time, each as the engine's method of its kind:

* a neural drafter → the engine's draft-model method, drafting exactly ``k`` tokens per step
  (the settings that would stop drafts early, a minimum draft probability or confidence, are
  set to 0, so the engine does what ewif prices);
* a proposer (Max-Gram: zero cost, :func:`ewif.predict.batch.is_proposer`) → the engine's n-gram /
  prompt-lookup method with ``k`` tokens per lookup: vLLM ``ngram`` (windows
  :data:`LOOKUP_MIN`..:data:`LOOKUP_MAX`), SGLang ``NGRAM`` (a chain: BFS breadth 1),
  TensorRT-LLM ``SA`` (suffix automaton, longest match), llama.cpp ``ngram-simple`` (lookup
  n-gram of :data:`LOOKUP_MAX` tokens), transformers prompt lookup (windows up to
  :data:`LOOKUP_MAX`). The assumption: the engine's lookup accepts as often as Max-Gram did
  when the set was measured. It does not exactly: Max-Gram takes the longest match and
  falls back to a bigram table, an engine's lookup drafts nothing without a match of its
  window. Measure the engine's own α with ``csd measure --from-metrics`` and recommend again.

Pricing, all exact (the model set's costs, catch-up flags and batched cost curves included;
a draft model as the engine runs it, :attr:`ewif.serving.engines.Engine.drafting`: llama.cpp
evaluates the target's batch again on the drafter every step):

* no batch sizes: each drafter at its best ``k`` (:func:`ewif.search.optimizer.best_sd`; for an
  engine
  that re-evaluates, the best :func:`ewif.predict.batch.batch_ratio` at batch 1 over
  ``k = 1..k_max``), scored by EWIF; the best drafter is emitted if its EWIF exceeds 1, else
  no speculation;
* batch sizes ``B_1..B_n``: each drafter's best ``k`` at every ``B`` and the throughput ratio
  against AR at that ``B`` (:func:`ewif.predict.batch.best_draft_lengths`), merged into ranges
  (:func:`ewif.predict.batch.schedule`). An engine that takes a per-batch-size schedule gets it
  (vLLM always; TensorRT-LLM when the schedule's first ``k`` is its largest, as its validator
  demands); any other gets the one ``k`` of the highest mean ratio over the asked sizes
  (:func:`single_k`, ties: the smaller ``k``). Drafters are scored by the mean ratio over the
  asked sizes (each size weighs the same); ``k = 0`` everywhere means no speculation.

Schedule rendering: between two asked batch sizes the smaller one's ``k`` holds, past the
largest asked size vLLM keeps the last ``k`` and TensorRT-LLM turns speculation off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ewif.base import validate
from ewif.predict.batch import BatchChoice, ScheduleRange, batch_ratio, is_proposer, pricing_note
from ewif.serving.engines import Engine, engine
from ewif.serving.plan import DRAFT_MODEL, LOOKUP_MAX, LOOKUP_MIN, NGRAM, NONE, Plan
from ewif.serving.render import RENDER

__all__ = [
    "DRAFT_MODEL",
    "LOOKUP_MAX",
    "LOOKUP_MIN",
    "NGRAM",
    "NONE",
    "Declined",
    "Emission",
    "Plan",
    "emission",
    "plans",
    "single_k",
]

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet
    from ewif.files.vllm_profile import VllmProfile


@dataclass(frozen=True)
class Declined:
    """The best speculation when none is emitted (it does not beat autoregressive decoding):
    its plan and the configuration that would run it, to try or to check the 'no'."""

    plan: Plan
    config: dict[str, Any] | list[str]
    text: str

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {"drafter": p.drafter, "method": p.method, "k": p.k, "ewif": p.ewif} | {
            "config": self.config,
            "text": self.text,
        }


@dataclass(frozen=True)
class Emission:
    """What ``csd recommend --emit`` prints: the chosen plan, the engine's configuration
    (``config``: a JSON/YAML mapping, a ``generate()`` keyword mapping, or the argument list
    of a server command) and ``text``, the ready-to-run form of it."""

    engine: Engine
    plan: Plan
    target: str
    config: dict[str, Any] | list[str]
    text: str
    notes: tuple[str, ...]
    declined: Declined | None = None

    def option_names(self) -> set[str]:
        """Every option name the configuration uses (flags, keys of the engine's mapping)."""
        if isinstance(self.config, list):
            return {w for w in self.config if w.startswith("-") and not _is_number(w)}
        names = set(self.config)
        if self.engine.key == "vllm" and self.config:
            names.add("--speculative-config")
        nested = self.config.get("speculative_config")
        if isinstance(nested, dict):
            names |= set(nested)
        return names

    def option_values(self) -> dict[str, str]:
        """The value of every option the engine constrains by name (``Engine.values``)."""
        if isinstance(self.config, list):
            pairs = dict(zip(self.config, [*self.config[1:], ""], strict=True))
        else:
            pairs = {**self.config, **(self.config.get("speculative_config") or {})}
        return {k: str(pairs[k]) for k in self.engine.values if k in pairs}

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {
            "engine": self.engine.key,
            "engine_name": self.engine.name,
            "method": p.method,
            "drafter": p.drafter if p.method != NONE else None,
            "k": p.k,
            "ewif": p.ewif,
            "by_batch": None
            if p.by_batch is None
            else [{"batch": c.batch, "k": c.k, "ratio": c.ratio} for c in p.by_batch],
            "schedule": None
            if p.ranges is None
            else [{"low": r.low, "high": r.high, "k": r.k} for r in p.ranges],
            "config": self.config,
            "text": self.text,
            "sources": [str(s) for s in self.engine.sources],
            "notes": list(self.notes),
            "declined": None if self.declined is None else self.declined.to_dict(),
        }


def single_k(
    model_set: ModelSet,
    drafter: str,
    sizes: Sequence[int],
    k_max: int,
    drafting: str = "kv-cached",
    profile: VllmProfile | None = None,
) -> int:
    """The ``k ∈ 0..k_max`` of the highest mean :func:`ewif.predict.batch.batch_ratio` over
    ``sizes`` (ties: the smaller ``k``; 0 = do not speculate)."""
    means = [
        np.mean([batch_ratio(model_set, drafter, k, b, None, drafting, profile) for b in sizes])
        for k in range(k_max + 1)
    ]
    return int(np.argmax(means))


def plans(
    model_set: ModelSet,
    eng: Engine,
    sizes: Sequence[int] | None,
    k_max: int,
    profile: VllmProfile | None = None,
) -> list[Plan]:
    """Every drafter's best plain drafting on ``eng`` (module docstring), in the set's order;
    drafters without a measured acceptance against the target are skipped."""
    from ewif.predict.batch import best_draft_lengths, schedule
    from ewif.search.optimizer import best_sd

    target, alpha = model_set.models[0], model_set.alpha[model_set.leniences[0]]
    out = []
    for j, d in enumerate(model_set.models[1:], start=1):
        if np.isnan(alpha[0, j]):
            continue
        method = NGRAM if is_proposer(model_set, d) else DRAFT_MODEL
        drafting = eng.drafting if method == DRAFT_MODEL or eng.drafting == "vllm" else "kv-cached"
        kmax = k_max
        if profile is not None:
            kmax = min(k_max, profile.k_max("draft_model" if method == DRAFT_MODEL else "ngram"))
            if kmax < 1:
                continue
        price = {"catch_up": None, "drafting": drafting, "profile": profile}
        if sizes is None and drafting == "kv-cached":
            sd = best_sd(model_set, [d])
            out.append(Plan(d, method, int(sd.K[0, 0]), sd.ewif))
            continue
        if sizes is None:  # ewif.search.optimizer prices kv-cached drafting only: batch 1 here
            (one,) = best_draft_lengths(model_set, d, [1], kmax, **price)
            k = max(one.k, 1)  # the best speculation, even if it loses to AR (then: none)
            out.append(Plan(d, method, k, batch_ratio(model_set, d, k, 1, **price)))
            continue
        choices = best_draft_lengths(model_set, d, sizes, kmax, **price)
        ranges = tuple(schedule(choices))
        if _expressible(eng, ranges):
            k1 = ranges[0].k  # the first range starts at batch 1 in the emitted schedule
            emitted = ranges if len(ranges) > 1 else None
        else:
            k1 = single_k(model_set, d, sizes, kmax, drafting, profile)
            choices = [BatchChoice(b, k1, batch_ratio(model_set, d, k1, b, **price)) for b in sizes]
            emitted = None
        if drafting == "kv-cached":
            ewif = model_set.to_cascade([target, d], [[k1]]).ewif() if k1 else 1.0
        else:
            ewif = batch_ratio(model_set, d, k1, 1, **price)
        out.append(Plan(d, method, k1, ewif, tuple(choices), emitted, ranges))
    if not out:
        raise ValueError("no drafter has a measured acceptance rate against the target")
    return out


def _asked_sizes(eng, batch_sizes: Sequence[int] | None, notes: list[str]) -> list[int] | None:
    """The asked batch sizes, sorted and deduplicated, cut to those the engine speculates at
    (a note says which were dropped); None when none were asked."""
    sizes = None
    if batch_sizes is not None:
        sizes = sorted({validate.count("batch size", b, minimum=1) for b in batch_sizes})
        if not sizes:
            raise ValueError("batch_sizes must hold at least one batch size")
        if eng.max_batch is not None:
            kept = [b for b in sizes if b <= eng.max_batch]
            if not kept:
                raise ValueError(
                    f"{eng.name} speculates at batch size {eng.max_batch} only; the batch "
                    f"sizes {sizes} hold none it can serve"
                )
            if kept != sizes:
                notes.append(
                    f"{eng.name} speculates at batch size <= {eng.max_batch} only: priced at "
                    f"{kept}, not {[b for b in sizes if b not in kept]}"
                )
            sizes = kept
    return sizes


def emission(
    model_set: ModelSet,
    engine_key: str,
    batch_sizes: Sequence[int] | None = None,
    *,
    k_max: int = 12,
    paths: Mapping[str, str] | None = None,
    profile: VllmProfile | None = None,
) -> Emission:
    """The best plain-drafting configuration ``engine_key`` can express for ``model_set``
    (module docstring), with the model names mapped to ``paths`` (default: the names);
    ``profile``: vLLM's own measured costs (vLLM only)."""
    eng = engine(engine_key)
    k_max = validate.count("k_max", k_max, minimum=1)
    paths = dict(paths or {})
    for name in paths:
        model_set.index(name)
    if profile is not None:
        _check_profile(model_set, eng, profile, batch_sizes)
    notes = [
        f"{eng.name} runs plain speculative drafting (one drafter proposes k tokens, the target "
        "verifies them in one pass), not cascades: this is the best plain drafting it can "
        "express for this model set"
    ]
    sizes = _asked_sizes(eng, batch_sizes, notes)
    if sizes and len(sizes) > 1 and profile is None and (why := pricing_note(model_set)):
        notes.append(why)
    candidates = plans(model_set, eng, sizes, k_max, profile)
    best = max(candidates, key=lambda p: p.score)  # first of equals: the larger drafter
    declined = None
    shown = best
    if (
        best.score <= 1.0
        and eng.drafting == "vllm"
        and sizes
        and not any(r.k for r in best.ranges or [best])
    ):
        shown = _speculating(model_set, best, sizes, k_max, profile)
    if best.score <= 1.0 and shown.k > 0:  # the best speculation, not emitted
        target = paths.get(model_set.models[0], model_set.models[0])
        config, text, _ = RENDER[eng.key](shown, target, paths.get(shown.drafter, shown.drafter))
        declined = Declined(shown, config, text)
    if best.score <= 1.0:  # k = 0 at every asked size, or EWIF <= 1 at batch 1
        if any(r.k for r in best.best_ranges or ()):
            notes.append(_one_k(eng, best))
        else:
            notes.append("no plain drafting beats autoregressive decoding here")
        alone = (
            None
            if best.by_batch is None
            else tuple(BatchChoice(c.batch, 0, 1.0) for c in best.by_batch)
        )
        best = Plan(best.drafter, NONE, 0, 1.0, alone, None, best.best_ranges)
        notes.append("serve the target alone")
    elif best.best_ranges is not None and best.ranges is None and len(best.by_batch) > 1:
        notes.append(_one_k(eng, best))
    losing = [c for c in best.by_batch or () if c.ratio < 1.0]
    if best.method != NONE and losing:
        notes.append(
            "priced below autoregressive decoding at "
            + ", ".join(f"B={c.batch} ({c.ratio:.3f}x)" for c in losing)
            + f"; {eng.name} cannot switch speculation off per batch size: the mean over the "
            "asked sizes decided (serve without speculation where those sizes dominate)"
        )
    target = paths.get(model_set.models[0], model_set.models[0])
    drafter = paths.get(best.drafter, best.drafter)
    config, text, more = RENDER[eng.key](best, target, drafter)
    more = [*_pricing_notes(best, profile), *more]
    return Emission(eng, best, target, config, text, (*notes, *more), declined)


def _pricing_notes(best: Plan, profile: VllmProfile | None) -> list[str]:
    """What the emitted n-gram lookup is priced as, and whether vLLM's own costs priced it."""
    out: list[str] = []
    if best.method == NGRAM and profile is None:
        out.append(
            f"{best.drafter} (a proposer) is emitted as the engine's n-gram lookup, priced as "
            f"{best.drafter}: this assumes the lookup accepts as often as {best.drafter} did "
            "when measured (it drafts nothing without a match, Max-Gram falls back to a "
            "bigram); measure it with csd measure --from-metrics and recommend again",
        )
    elif best.method == NGRAM and profile.ngram is not None:
        out.append(
            f"{best.drafter} (a proposer) is emitted as vLLM's n-gram lookup, priced with "
            f"vLLM's own n-gram behaviour from the profile (match rate "
            f"{profile.ngram.match_rate:.3f}, α by position "
            f"{', '.join(f'{a:.3f}' for a in profile.ngram.alpha_by_position)})",
        )
    if profile is not None:
        out.append(
            "priced with vLLM's own step costs (the vLLM profile: "
            f"{profile.metadata.get('engine', 'vLLM')}, batch sizes {profile.batch_sizes}), "
            "the draft model's padded catch-up pass included (ewif.predict.batch, 'vllm')"
        )
    return out


def _speculating(
    model_set: ModelSet, plan: Plan, sizes: Sequence[int], k_max: int, profile: VllmProfile | None
) -> Plan:
    """``plan``'s drafter at its best ``k >= 1`` at every batch size, priced as vLLM drafts: the
    speculation to show when none is emitted (a schedule of ``k = 0`` would still run a draft
    model's first pass, so it is no speculation worth showing)."""
    from ewif.predict.batch import schedule

    if profile is not None:
        k_max = min(k_max, profile.k_max("draft_model" if plan.method == DRAFT_MODEL else "ngram"))
    price = {"catch_up": None, "drafting": "vllm", "profile": profile}
    choices = []
    for b in sizes:
        ratios = [batch_ratio(model_set, plan.drafter, k, b, **price) for k in range(1, k_max + 1)]
        k = 1 + int(np.argmax(ratios))
        choices.append(BatchChoice(b, k, ratios[k - 1]))
    ranges = tuple(schedule(choices))
    k1 = ranges[0].k
    ewif = batch_ratio(model_set, plan.drafter, k1, 1, **price)
    return Plan(
        plan.drafter,
        plan.method,
        k1,
        ewif,
        tuple(choices),
        ranges if len(ranges) > 1 else None,
        ranges,
    )


def _check_profile(
    model_set: ModelSet, eng: Engine, profile: VllmProfile, sizes: Sequence[int] | None
) -> None:
    """A vLLM profile fits this emission: vLLM, the set's target, measured batch sizes."""
    if eng.key != "vllm":
        raise ValueError(f"a vLLM profile prices vLLM only, not {eng.name}")
    if profile.target != model_set.models[0]:
        raise ValueError(
            f"the vLLM profile was measured for the target {profile.target!r}, the model set's "
            f"is {model_set.models[0]!r}"
        )
    if profile.drafter is not None and profile.drafter not in model_set.models:
        raise ValueError(f"the vLLM profile's drafter {profile.drafter!r} is not in the model set")
    missing = sorted(set(sizes or [1]) - set(profile.batch_sizes))
    if missing:
        raise ValueError(
            f"the vLLM profile is measured at batch sizes {profile.batch_sizes}, not {missing}"
        )


def _expressible(eng: Engine, ranges: Sequence[ScheduleRange]) -> bool:
    """Whether ``eng`` takes these ranges as a per-batch-size schedule."""
    if eng.schedule == "ranges":
        return True
    if eng.schedule == "thresholds":  # schedule[smallest key] must equal max_draft_len
        return ranges[0].k == max(r.k for r in ranges)
    return False


def _one_k(eng: Engine, plan: Plan) -> str:
    """Why one ``k`` is emitted although batch sizes were asked."""
    best = "; ".join(
        f"B={r.low}" + (f"..{r.high}" if r.high > r.low else "") + f": k={r.k}"
        for r in plan.best_ranges or ()
    )
    if len(plan.best_ranges or ()) <= 1:
        return f"k = {plan.k} is best at every asked batch size"
    why = (
        "its draft_len_schedule needs the smallest batch size's k to be the largest"
        if eng.schedule == "thresholds"
        else "it takes one draft length for every batch size"
    )
    return (
        f"the best schedule is {best}, but {eng.name} cannot express it ({why}): k = {plan.k} "
        "has the highest mean throughput over the asked batch sizes"
    )


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
