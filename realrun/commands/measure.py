"""``csd measure``: measure α and pass-cost curves of real models into a model-set file.

Example::

    csd measure path/to/target path/to/drafter --mag --prompts all --limit 4 \\
        --max-new-tokens 32 -o measured.json
    csd recommend --from measured.json

Models are hub ids already in the local cache, local directories or ``.gguf`` files
(converted once; with ``--backend llama.cpp`` ``.gguf`` files run as stored by llama.cpp);
the first is the target, then drafters largest first; ``--mag`` appends Max-Gram (bigram
fallback from ``--bigram FILE``, else counted over the shipped prompts).
With ``--dtype auto``/``--threads auto`` on a CPU every candidate dtype and thread count is
measured and the one with the highest predicted throughput among batch-invariant ones is
written (see :mod:`realrun.pipeline`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

HELP = "measure acceptance rates and pass-cost curves of real models (writes a csd.models/4 file)"


def threads_arg(value: str) -> int | str:
    """``auto`` or a positive thread count (argparse type)."""
    if value == "auto":
        return value
    n = int(value) if value.isdigit() else 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 'auto' or a positive integer, got {value!r}")
    return n


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``csd measure`` and ``csd realrun``."""
    parser.add_argument(
        "models",
        nargs="+",
        metavar="MODEL",
        help="target first, then drafters largest first (hub id, dir or .gguf)",
    )
    parser.add_argument("--mag", action="store_true", help="append Max-Gram as the last drafter")
    parser.add_argument("--bigram", metavar="FILE", help="Max-Gram bigram table (.npz)")
    parser.add_argument(
        "--prompts",
        default="all",
        help="shipped set (gsm8k_style, mmlu_style, code, all) or a JSONL file",
    )
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument(
        "--dtype",
        default="auto",
        help="auto (CPU: measured, see docs/realrun.md), float32, bfloat16 or float16",
    )
    parser.add_argument(
        "--threads",
        type=threads_arg,
        default="auto",
        help="torch CPU threads: auto (measured) or a number",
    )
    parser.add_argument("--k-max", type=int, default=12, help="largest K entry searched")
    parser.add_argument(
        "--backend",
        choices=("transformers", "llama.cpp"),
        default="transformers",
        help="inference engine: transformers, or llama.cpp (.gguf files as "
        "stored; needs the llamacpp extra)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bars on stderr (default: only when stderr is a terminal)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--limit", type=int, default=4, help="measure on the first N prompts")
    parser.add_argument("--leniences", type=float, nargs="+", default=[1.0, 2.0, 3.0, 5.0])
    parser.add_argument(
        "--max-m", type=int, default=None, help="time passes of m = 1..MAX_M (default 2 x --k-max)"
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("-o", "--output", required=True, help="model-set file to write")


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of :func:`add_model_arguments` as ``measure_numerics`` and
    ``run_pipeline`` take them: the family (``mag``, ``bigram``, ``backend``), its numerics
    (``device``, ``dtype``, ``threads``), the decoding (``--temperature``/``--top-p``),
    ``max_new_tokens``, ``k_max`` and ``progress`` (``--progress``/``--no-progress``, else
    bars only when stderr is a terminal)."""
    from simulate.decoder.sampling import Decoding

    names = ("mag", "bigram", "backend", "device", "dtype", "threads", "max_new_tokens", "k_max")
    return {name: getattr(args, name) for name in names} | {
        "decoding": Decoding(args.temperature, args.top_p),
        "progress": sys.stderr.isatty() if args.progress is None else args.progress,
    }


def run(args: argparse.Namespace) -> int:
    from transformers.utils import logging as hf_logging

    from ewif import io as model_io
    from realrun.numerics import measure_numerics
    from realrun.pipeline import split_prompts
    from realrun.results_tables import format_model_set

    hf_logging.disable_progress_bar()
    measuring, _ = split_prompts(args.prompts, args.limit, None, held_out=False)
    measured = measure_numerics(
        args.models,
        measuring,
        leniences=args.leniences,
        max_m=args.max_m,
        repeats=args.repeats,
        warmup=args.warmup,
        **model_options(args),
    )
    model_io.save(measured.model_set, args.output)
    if args.json:
        print(json.dumps(measured.model_set.to_dict(), indent=2))
    else:
        print(*measured.summary, sep="\n")
        print(format_model_set(measured.model_set))
        print(f"written: {args.output}  (next: csd recommend --from {args.output})")
    return 0
