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

``--from-metrics FILE [FILE]`` runs no model: it reads a serving engine's own counters (vLLM,
llama-server, llama-speculative-simple; :mod:`realrun.engine_metrics`) and writes the model set
of ``MODEL MODEL`` (target, drafter; default ``target drafter``) with that α and the pass costs
of ``--costs FILE`` or ``--cost-curve NAME=C1,C2,...``; it imports neither torch nor
transformers.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

HELP = "measure acceptance rates and pass-cost curves of real models (writes a csd.models/6 file)"


def threads_arg(value: str) -> int | str:
    """``auto`` or a positive thread count (argparse type)."""
    if value == "auto":
        return value
    n = int(value) if value.isdigit() else 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 'auto' or a positive integer, got {value!r}")
    return n


def add_model_arguments(parser: argparse.ArgumentParser, models_nargs: str = "+") -> None:
    """Arguments shared by ``csd measure`` and ``csd realrun``."""
    parser.add_argument(
        "models",
        nargs=models_nargs,
        metavar="MODEL",
        help="target first, then drafters largest first: a hub id in the local cache, a "
        "save_pretrained directory, or a .gguf file (with the transformers backend converted "
        "once to float32 safetensors in ~/.cache/csd/models or $CSD_CACHE, about 4 bytes per "
        "parameter: ~0.5 GB for a 135M model)",
    )
    parser.add_argument("--mag", action="store_true", help="append Max-Gram as the last drafter")
    parser.add_argument("--bigram", metavar="FILE", help="Max-Gram bigram table (.npz)")
    parser.add_argument(
        "--prompts",
        default="all",
        help="shipped set (all: ten categories dealt in turn; classic; or one of "
        "gsm8k_style, mmlu_style, code, writing, translation, summary, qa, reasoning, rag, "
        "edit) or a JSONL file",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=32, help="tokens generated per prompt"
    )
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument(
        "--top-p",
        type=float,
        default=1.0,
        help="nucleus sampling: keep the smallest set of tokens of this total probability "
        "(1 = all; used when --temperature > 0)",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    add_numerics_arguments(parser)
    parser.add_argument("--k-max", type=int, default=12, help="largest K entry searched")
    parser.add_argument(
        "--min-timing-seconds",
        type=float,
        default=60.0,
        help="the cost curves' timing rounds go on while they took less than this, up to "
        "four times as many (default 60: a small model's cheap rounds are timed longer)",
    )
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


def add_numerics_arguments(parser: argparse.ArgumentParser) -> None:
    """The numerics and how the search judges them (:mod:`realrun.numerics`)."""
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=("auto", "float32", "bfloat16", "float16"),
        help="auto (CPU: measured, see docs/realrun.md), float32, bfloat16 or float16",
    )
    parser.add_argument(
        "--threads",
        type=threads_arg,
        default="auto",
        help="torch CPU threads: auto (measured) or a number",
    )
    parser.add_argument(
        "--batch-invariance",
        choices=("strict", "near-ties"),
        default="strict",
        help="which numerics may serve greedy speculative decoding (--dtype/--threads auto): "
        "strict (default) keeps only candidates whose multi-position target pass makes the "
        "same greedy choices as single passes, so outputs equal AR's token for token, at the "
        "price of excluding a faster dtype that flips a near-tie; near-ties also admits "
        "flips within 2 rounding steps of the dtype (one bfloat16 step at a logit of 20 is "
        "0.125): the faster dtype may win, and a greedy output may then differ from AR's at "
        "such a near-tie (it follows the verifying pass)",
    )
    parser.add_argument(
        "--numerics-choice",
        choices=("assured", "mean"),  # realrun.numerics_choice.CHOICE_RULES
        default="assured",
        help="how the numerics search ranks candidates (--dtype/--threads auto): assured "
        "(default) by the throughput's one-sided 95 %% lower bound over the drafts' acceptance "
        "resampled, so a speculative lead must hold at its worst plausible acceptance; mean by "
        "the predicted throughput at the measured acceptance (faster on average with many "
        "measuring prompts; the rule of files made before this option); the same rule decides "
        "whether the run's recommendation speculates at all (ewif.predict.assurance)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, models_nargs="*")
    parser.add_argument("--limit", type=int, default=4, help="measure on the first N prompts")
    parser.add_argument(
        "--leniences",
        type=float,
        nargs="+",
        default=[1.0, 2.0, 3.0, 5.0],
        help="leniences at which drafters' reviews of drafters are measured (each >= 1)",
    )
    parser.add_argument(
        "--max-m", type=int, default=None, help="time passes of m = 1..MAX_M (default 2 x --k-max)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=10,
        help="timing rounds of the cost curves (interleaved, over the measuring contexts)",
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed passes before each timed size"
    )
    parser.add_argument(
        "--batch-sizes",
        metavar="B,B,...",
        help="also time batched passes of B rows (a serving engine's step; written as the "
        "model set's batch_cost_curve; default: none)",
    )
    parser.add_argument("-o", "--output", required=True, help="model-set file to write")
    metrics = parser.add_argument_group(
        "from a serving engine's counters (no model is run; MODEL MODEL name the target and "
        "the drafter, default: target drafter)"
    )
    metrics.add_argument(
        "--from-metrics",
        nargs="+",
        metavar="FILE",
        help="vLLM or llama-server /metrics (one scrape, or two: before and after), vLLM "
        "per-request metrics JSON, or llama-speculative-simple logs (realrun.engine_metrics)",
    )
    metrics.add_argument(
        "--engine",
        choices=("auto", "vllm", "llama.cpp", "sglang"),
        default="auto",
        help="the engine that wrote --from-metrics (auto: recognised by content)",
    )
    costs = metrics.add_mutually_exclusive_group()
    costs.add_argument(
        "--costs",
        metavar="FILE",
        help="model-set file with measured cost curves of the target and the drafter",
    )
    costs.add_argument(
        "--cost-curve",
        action="append",
        metavar="NAME=C1,C2,...",
        help="pass cost of model NAME over m = 1, 2, ... positions in target one-position "
        "passes (the target's starts at 1); once for the target, once for the drafter",
    )


def model_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of :func:`add_model_arguments` as ``measure_numerics`` and
    ``run_pipeline`` take them: the family (``mag``, ``bigram``, ``backend``), its numerics
    (``device``, ``dtype``, ``threads``, the ``batch_invariance`` and ``numerics_choice``
    rules), the decoding
    (``--temperature``/``--top-p``), ``max_new_tokens``, ``k_max``, ``min_timing_seconds``
    and ``progress`` (``--progress``/``--no-progress``, else bars only when stderr is a
    terminal)."""
    from simulate.decoder.sampling import Decoding

    names = ("mag", "bigram", "backend", "device", "dtype", "threads", "max_new_tokens", "k_max")
    return {name: getattr(args, name) for name in names} | {
        "batch_invariance": args.batch_invariance,
        "numerics_choice": args.numerics_choice,
        "min_timing_seconds": args.min_timing_seconds,
        "decoding": Decoding(args.temperature, args.top_p),
        "progress": sys.stderr.isatty() if args.progress is None else args.progress,
    }


def run(args: argparse.Namespace) -> int:
    from realrun.arguments import check_measure

    if args.from_metrics:
        return _run_from_metrics(args)
    if not args.models:
        raise ValueError("give MODEL ... (target first) to measure, or --from-metrics FILE")
    sizes = check_measure(args)  # every argument, before any model is loaded or converted
    from transformers.utils import logging as hf_logging

    from ewif.files import model_set as model_io
    from realrun.categories import with_categories
    from realrun.model_set_tables import format_model_set
    from realrun.numerics import measure_numerics
    from realrun.pipeline import split_prompts

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
    model_set = with_categories(measured.model_set, measuring)  # α per category too
    if sizes is not None:
        model_set = _with_batch_costs(model_set, measured.family, measuring, sizes, args)
    model_io.save(model_set, args.output)
    if args.json:
        print(json.dumps(model_set.to_dict(), indent=2))
    else:
        print(*measured.summary, sep="\n")
        print(format_model_set(model_set))
        print(f"written: {args.output}  (next: csd recommend --from {args.output})")
    return 0


def _with_batch_costs(model_set, family, measuring, sizes, args: argparse.Namespace):
    """``model_set`` with the family's batched pass costs at the batch ``sizes``
    (:func:`realrun.batched.measure_batch_costs`, on the measuring prompts)."""
    from dataclasses import replace

    from realrun.batched import measure_batch_costs
    from realrun.prompts import encode

    costs, timed = measure_batch_costs(
        family.chain,
        [encode(p, family.tokenizer) for p in measuring],
        sizes,
        max_m=args.k_max + 1,
        unit_seconds=model_set.metadata["ar_seconds_per_token"],
        rounds=args.repeats,
    )
    meta = {**model_set.metadata, "batch_timing": timed.to_dict()}
    return replace(model_set, batch_costs=costs, metadata=meta)


def _run_from_metrics(args: argparse.Namespace) -> int:
    """``--from-metrics``: α from an engine's counters and the given costs, written as a model
    set (:mod:`realrun.engine_metrics`; imports neither torch nor transformers)."""
    from ewif.files import model_set as model_io
    from realrun import engine_metrics as em
    from realrun.arguments import writable
    from realrun.engine_counters.reading import read_counters

    _refuse_model_options(args)
    writable(args.output, "model-set file")
    names = tuple(args.models) or ("target", "drafter")
    if len(names) != 2:
        raise ValueError(
            f"--from-metrics reads one target and one drafter: give two MODEL names, got "
            f"{list(names)}"
        )
    counters = read_counters(args.from_metrics, args.engine)
    if args.costs:
        curves, extra = em.curves_from_file(args.costs, names)
        meta: dict = {"costs": f"cost curves of {args.costs}"}
        if extra["timing"]:
            meta["timing"] = extra["timing"]
        catch_up, batch_costs = extra.get("catch_up"), extra.get("batch_costs")
    elif args.cost_curve:
        given = em.parse_cost_curves(args.cost_curve)
        if set(given) != set(names):
            raise ValueError(
                f"--cost-curve must give the curves of {list(names)} (the MODEL names), got "
                f"{list(given)}"
            )
        curves, meta = [given[n] for n in names], {"costs": "--cost-curve"}
        catch_up = batch_costs = None
    else:
        raise ValueError(
            "--from-metrics needs pass costs: --costs FILE (a model set with measured cost "
            "curves) or --cost-curve NAME=C1,C2,... for the target and the drafter"
        )
    acc = em.acceptance(counters)
    meta["metrics_files"] = [str(p) for p in args.from_metrics]
    ms = em.model_set_from_metrics(
        acc, names, curves, catch_up=catch_up, batch_costs=batch_costs, metadata=meta
    )
    model_io.save(ms, args.output)
    if args.json:
        print(
            json.dumps({"models": list(names), **acc.to_dict(), "written": args.output}, indent=2)
        )
    else:
        print(em.format_acceptance(acc, args.from_metrics, names))
        print(f"written: {args.output}  (next: csd recommend --from {args.output} --emit ENGINE)")
    return 0


#: The options ``--from-metrics`` uses; every other one shapes a run of models.
_METRICS_OPTIONS = {"models", "from_metrics", "engine", "costs", "cost_curve", "output", "json"}


def _refuse_model_options(args: argparse.Namespace) -> None:
    """``--from-metrics`` runs no model: an option that only sizes or shapes a run of models
    (``--mag``, ``--limit``, ``--batch-sizes`` …), given other than its default, is refused
    rather than silently ignored."""
    fresh = argparse.ArgumentParser()
    add_arguments(fresh)
    defaults = vars(fresh.parse_args(["-o", args.output]))
    given = [
        k for k, v in vars(args).items() if k in defaults and k not in _METRICS_OPTIONS
        and k != "progress" and v != defaults[k]
    ]  # fmt: skip
    if given:
        options = ", ".join("--" + k.replace("_", "-") for k in given)
        raise ValueError(
            f"--from-metrics runs no model: {options} {'does' if len(given) == 1 else 'do'} "
            "not apply (α comes from the engine's counters, costs from --costs/--cost-curve)"
        )
