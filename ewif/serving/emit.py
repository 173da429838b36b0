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

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ewif.base import validate
from ewif.predict.batch import BatchChoice, ScheduleRange, batch_ratio, is_proposer, pricing_note
from ewif.serving.engines import Engine, engine

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet

#: The longest n-gram an engine's lookup matches (vLLM prompt_lookup_max, transformers
#: max_matching_ngram_size, llama.cpp's fixed lookup n-gram). Max-Gram has no upper bound;
#: longer windows change little once a match is this long.
LOOKUP_MAX = 4
#: The shortest n-gram an engine's lookup matches (Max-Gram's default minimum match, 1).
LOOKUP_MIN = 1

DRAFT_MODEL = "draft model"
NGRAM = "n-gram lookup"
NONE = "none"


@dataclass(frozen=True)
class Plan:
    """One drafter's best plain drafting on an engine: ``k`` at batch 1 (or the single ``k``)
    and its exact EWIF at batch 1; with batch sizes, the choices emitted by asked batch size,
    the ranges emitted as a per-batch-size schedule (None when one ``k`` is emitted) and the
    best schedule without the engine's limits (``best_ranges``)."""

    drafter: str
    method: str
    k: int
    ewif: float
    by_batch: tuple[BatchChoice, ...] | None = None
    ranges: tuple[ScheduleRange, ...] | None = None
    best_ranges: tuple[ScheduleRange, ...] | None = None

    @property
    def score(self) -> float:
        """EWIF without batch sizes, else the mean throughput ratio over the asked sizes."""
        if self.by_batch is None:
            return self.ewif
        return float(np.mean([c.ratio for c in self.by_batch]))


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
) -> int:
    """The ``k ∈ 0..k_max`` of the highest mean :func:`ewif.predict.batch.batch_ratio` over
    ``sizes`` (ties: the smaller ``k``; 0 = do not speculate)."""
    means = [
        np.mean([batch_ratio(model_set, drafter, k, b, drafting=drafting) for b in sizes])
        for k in range(k_max + 1)
    ]
    return int(np.argmax(means))


def plans(model_set: ModelSet, eng: Engine, sizes: Sequence[int] | None, k_max: int) -> list[Plan]:
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
        drafting = eng.drafting if method == DRAFT_MODEL else "kv-cached"
        if sizes is None and drafting == "kv-cached":
            sd = best_sd(model_set, [d])
            out.append(Plan(d, method, int(sd.K[0, 0]), sd.ewif))
            continue
        if (
            sizes is None
        ):  # ewif.search.optimizer prices no re-evaluating drafter: ewif.predict.batch at B = 1
            (one,) = best_draft_lengths(model_set, d, [1], k_max=k_max, drafting=drafting)
            k = max(one.k, 1)  # the best speculation, even if it loses to AR (then: none)
            out.append(Plan(d, method, k, batch_ratio(model_set, d, k, 1, drafting=drafting)))
            continue
        choices = best_draft_lengths(model_set, d, sizes, k_max=k_max, drafting=drafting)
        ranges = tuple(schedule(choices))
        if _expressible(eng, ranges):
            k1 = ranges[0].k  # the first range starts at batch 1 in the emitted schedule
            emitted = ranges if len(ranges) > 1 else None
        else:
            k1 = single_k(model_set, d, sizes, k_max, drafting)
            choices = [
                BatchChoice(b, k1, batch_ratio(model_set, d, k1, b, drafting=drafting))
                for b in sizes
            ]
            emitted = None
        if drafting == "kv-cached":
            ewif = model_set.to_cascade([target, d], [[k1]]).ewif() if k1 else 1.0
        else:
            ewif = batch_ratio(model_set, d, k1, 1, drafting=drafting)
        out.append(Plan(d, method, k1, ewif, tuple(choices), emitted, ranges))
    if not out:
        raise ValueError("no drafter has a measured acceptance rate against the target")
    return out


def emission(
    model_set: ModelSet,
    engine_key: str,
    batch_sizes: Sequence[int] | None = None,
    *,
    k_max: int = 12,
    paths: Mapping[str, str] | None = None,
) -> Emission:
    """The best plain-drafting configuration ``engine_key`` can express for ``model_set``
    (module docstring), with the model names mapped to ``paths`` (default: the names)."""
    eng = engine(engine_key)
    k_max = validate.count("k_max", k_max, minimum=1)
    paths = dict(paths or {})
    for name in paths:
        model_set.index(name)
    notes = [
        f"{eng.name} runs plain speculative drafting (one drafter proposes k tokens, the target "
        "verifies them in one pass), not cascades: this is the best plain drafting it can "
        "express for this model set"
    ]
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
        if len(sizes) > 1 and (why := pricing_note(model_set)) is not None:
            notes.append(why)
    candidates = plans(model_set, eng, sizes, k_max)
    best = max(candidates, key=lambda p: p.score)  # first of equals: the larger drafter
    declined = None
    if best.score <= 1.0 and best.k > 0:  # the best speculation, not emitted
        target = paths.get(model_set.models[0], model_set.models[0])
        config, text, _ = _RENDER[eng.key](best, target, paths.get(best.drafter, best.drafter))
        declined = Declined(best, config, text)
    if best.score <= 1.0:  # k = 0 at every asked size, or EWIF <= 1 at batch 1
        if any(r.k for r in best.best_ranges or ()):
            notes.append(_one_k(eng, best))
        else:
            notes.append("no plain drafting beats autoregressive decoding here")
        best = Plan(best.drafter, NONE, 0, 1.0, best.by_batch, None, best.best_ranges)
        notes.append("serve the target alone")
    elif best.best_ranges is not None and best.ranges is None and len(best.by_batch) > 1:
        notes.append(_one_k(eng, best))
    target = paths.get(model_set.models[0], model_set.models[0])
    drafter = paths.get(best.drafter, best.drafter)
    config, text, more = _RENDER[eng.key](best, target, drafter)
    if best.method == NGRAM:
        more.insert(
            0,
            f"{best.drafter} (a proposer) is emitted as the engine's n-gram lookup, priced as "
            f"{best.drafter}: this assumes the lookup accepts as often as {best.drafter} did "
            "when measured (it drafts nothing without a match, Max-Gram falls back to a "
            "bigram); measure it with csd measure --from-metrics and recommend again",
        )
    return Emission(eng, best, target, config, text, (*notes, *more), declined)


def _expressible(eng: Engine, ranges: Sequence[ScheduleRange]) -> bool:
    """Whether ``eng`` takes these ranges as a per-batch-size schedule."""
    if eng.schedule == "ranges":
        return True
    if eng.schedule == "thresholds":  # schedule[smallest key] must equal max_draft_len
        return ranges[0].k == max(r.k for r in ranges)
    return False


def _span(ranges: Sequence[ScheduleRange]) -> list[tuple[int, int, int]]:
    """Contiguous ``(low, high, k)``: the first from 1, each up to the next one's low − 1,
    the last to its own high (the largest asked batch size)."""
    out = []
    for i, r in enumerate(ranges):
        high = ranges[i + 1].low - 1 if i + 1 < len(ranges) else r.high
        out.append((1 if i == 0 else r.low, high, r.k))
    return out


def _kmax(plan: Plan) -> int:
    """The largest ``k`` emitted (``num_speculative_tokens``, ``max_draft_len``)."""
    return max(r.k for r in plan.ranges) if plan.ranges else plan.k


def _vllm(plan: Plan, target: str, drafter: str) -> tuple[dict, str, list[str]]:
    notes: list[str] = []
    if plan.method == NONE:
        return {}, f"vllm serve {shlex.quote(target)}", notes
    config: dict[str, Any] = (
        {"method": "draft_model", "model": drafter}
        if plan.method == DRAFT_MODEL
        else {"method": "ngram", "prompt_lookup_max": LOOKUP_MAX, "prompt_lookup_min": LOOKUP_MIN}
    )
    config["num_speculative_tokens"] = _kmax(plan)
    if plan.ranges:
        config["num_speculative_tokens_per_batch_size"] = [list(t) for t in _span(plan.ranges)]
        notes.append(
            "num_speculative_tokens_per_batch_size: a batch size between two asked ones takes "
            f"the smaller one's k; past {plan.ranges[-1].high} vLLM keeps the last k"
        )
    text = (
        f"vllm serve {shlex.quote(target)} --speculative-config {shlex.quote(json.dumps(config))}"
    )
    return config, text, notes


def _sglang(plan: Plan, target: str, drafter: str) -> tuple[list, str, list[str]]:
    argv = ["--model-path", target]
    notes: list[str] = []
    if plan.method == DRAFT_MODEL:
        argv += ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path"]
        argv += [drafter, "--speculative-num-steps", str(plan.k), "--speculative-eagle-topk"]
        argv += ["1", "--speculative-num-draft-tokens", str(plan.k + 1)]
    elif plan.method == NGRAM:
        argv += ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens"]
        argv += [str(plan.k + 1), "--speculative-ngram-min-bfs-breadth", "1"]
        argv += ["--speculative-ngram-max-bfs-breadth", "1"]
        notes.append(
            "SGLang's NGRAM drafts from a trie of the n-grams of all requests (CUDA only); "
            "BFS breadth 1 makes its draft one chain of k tokens"
        )
    if plan.method != NONE:
        notes.append(
            f"--speculative-num-draft-tokens {plan.k + 1} counts the k = {plan.k} drafted "
            "tokens and the chain's root (the last accepted token)"
        )
    return argv, "python -m sglang.launch_server " + shlex.join(argv), notes


def _trtllm(plan: Plan, target: str, drafter: str) -> tuple[dict, str, list[str]]:
    import yaml

    notes: list[str] = []
    if plan.method == NONE:
        return {}, f"# no speculative_config: serve {target} alone", notes
    spec: dict[str, Any] = (
        {
            "decoding_type": "Draft_Target",
            "max_draft_len": _kmax(plan),
            "speculative_model": drafter,
        }
        if plan.method == DRAFT_MODEL
        else {"decoding_type": "SA", "max_draft_len": _kmax(plan), "max_matching_ngram_size": -1}
    )
    if plan.ranges:
        spec["draft_len_schedule"] = {high: k for _, high, k in _span(plan.ranges)}
        notes.append(
            "draft_len_schedule: sizes up to each key use its k; above the largest key "
            f"({plan.ranges[-1].high}) TensorRT-LLM turns speculation off: ask --batch-sizes "
            "up to the largest batch you serve"
        )
    config = {"speculative_config": spec}
    notes.append(
        f"the YAML is the speculative_config field of TensorRT-LLM's LLM-API options "
        f"(llm_args.py) for the target {target}"
    )
    return config, yaml.safe_dump(config, sort_keys=False).rstrip(), notes


def _llama_cpp(plan: Plan, target: str, drafter: str) -> tuple[list, str, list[str]]:
    argv = ["-m", target]
    notes: list[str] = []
    if plan.method == DRAFT_MODEL:
        argv += ["-md", drafter, "--spec-type", "draft-simple", "--spec-draft-n-max"]
        argv += [str(plan.k), "--spec-draft-n-min", "0", "--spec-draft-p-min", "0"]
        notes.append(
            "--spec-draft-p-min 0 and --spec-draft-n-min 0 make every draft k tokens long, as "
            "priced; so is llama-server's drafter pass over the target's k + 1 positions each "
            "step (ewif.predict.batch drafting 'reevaluate')"
        )
    elif plan.method == NGRAM:
        argv += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(LOOKUP_MAX)]
        argv += ["--spec-ngram-simple-size-m", str(plan.k)]
    argv.append("--metrics")
    notes.append(
        "--metrics exposes the llamacpp:spec_decode_* counters that csd measure "
        "--from-metrics reads; add -np N for N parallel slots"
    )
    return argv, "llama-server " + shlex.join(argv), notes


def _transformers(plan: Plan, target: str, drafter: str) -> tuple[dict, str, list[str]]:
    kwargs: dict[str, Any] = {}
    notes: list[str] = []
    if plan.method == DRAFT_MODEL:
        kwargs = {
            "assistant_model": drafter,
            "num_assistant_tokens": plan.k,
            "num_assistant_tokens_schedule": "constant",
            "assistant_confidence_threshold": 0.0,
        }
        notes.append(
            "assistant_model is the model loaded from the path given; "
            "assistant_confidence_threshold 0.0 keeps every draft k tokens long (the default "
            "0.4 stops drafts early)"
        )
        notes.append(
            "the EWIF is priced with the passes a KV-cached decoder pays (csd's own); "
            "transformers' assisted generation adds a generate() call of the assistant per "
            "step, so read it as an upper bound (docs/serving.md: measured 0.60x where 0.85x "
            "was priced on a 1.5B/0.5B pair)"
        )
    elif plan.method == NGRAM:
        kwargs = {"prompt_lookup_num_tokens": plan.k, "max_matching_ngram_size": LOOKUP_MAX}
    shown = {k: v for k, v in kwargs.items() if k != "assistant_model"}
    lines = [  # runs as printed: decoder-only or encoder-decoder, by the model's own config
        "from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, "
        "AutoTokenizer",
        f"target = {target!r}",
        "Auto = (AutoModelForSeq2SeqLM if AutoConfig.from_pretrained(target).is_encoder_decoder",
        "        else AutoModelForCausalLM)",
        "tokenizer = AutoTokenizer.from_pretrained(target)",
        "model = Auto.from_pretrained(target)",
    ]
    args = "".join(f", {k}={v!r}" for k, v in shown.items())
    if plan.method == DRAFT_MODEL:
        lines.append(f"assistant = Auto.from_pretrained({drafter!r})")
        args = ", assistant_model=assistant" + args
    lines += [
        'inputs = tokenizer("Your prompt here", return_tensors="pt")',
        f"out = model.generate(**inputs, max_new_tokens=64{args})",
        "print(tokenizer.decode(out[0], skip_special_tokens=True))",
    ]
    return kwargs, "\n".join(lines), notes


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


_RENDER = {
    "vllm": _vllm,
    "sglang": _sglang,
    "trtllm": _trtllm,
    "llama.cpp": _llama_cpp,
    "transformers": _transformers,
}


def _is_number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
