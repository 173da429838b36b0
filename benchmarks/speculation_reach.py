"""How far speculation goes where drafts are cheap and right: code edits whose answer repeats the
given code, and answers from a long given document — measured on this CPU.

For each ``--family`` and ``--categories`` entry, one :func:`realrun.pipeline.run_pipeline`
over that category's shipped prompts alone (the first ``--measure-prompts`` measure α and the
cost curves, the next ``--limit`` are held out): AR, SD with Max-Gram (and each neural drafter)
at its ewif-best k, ewif's recommended cascade and transformers' prompt lookup, side by side,
greedy, ``--max-new-tokens`` each. Numerics are fixed (``--dtype``, ``--threads``; the numerics
search is not what this measures). Families: ``smollm2`` (SmolLM2-135M > Max-Gram), ``qwen05``
(Qwen2.5-Coder-0.5B > Max-Gram), ``qwen`` (Qwen2.5-Coder-1.5B > 0.5B > Max-Gram).

Writes one ``csd.results/1`` file per run and ``speculation_reach.json`` (per run: the speed-ups
measured and predicted, α of every drafter, Max-Gram's accepted-token sources, the CPU) to
``--out``. Time it under ``/work/tools/cpu-exclusive``.

Usage::

    python benchmarks/speculation_reach.py --family qwen05 smollm2 --categories edit rag
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from ewif.files import results as results_io
from ewif.files.model_set import ModelSet
from realrun.pipeline import run_pipeline
from realrun.results_tables import format_results

FAMILIES = {
    "smollm2": ["smollm2"],
    "qwen05": ["qwen-0.5b"],
    "qwen": ["qwen-1.5b", "qwen-0.5b"],
}


def summary(run: results_io.Results) -> dict:
    """What the run says about how far speculation went."""
    ms = ModelSet.from_dict(run.metadata["model_set"], "run")
    alpha = ms.alpha[1.0]
    return {
        "ar_tokens_per_s": next(m.tokens_per_s for m in run.methods if m.kind == "autoregressive"),
        "methods": [
            {
                "name": m.name,
                "speedup": m.speedup,
                "predicted": m.predicted_speedup,
                "tokens_per_step": m.mean_accepted_length,
            }
            for m in run.methods
        ],
        "alpha_target": {d: float(alpha[0, j]) for j, d in enumerate(ms.models) if j},
        "accepted_token_sources": run.metadata.get("accepted_token_sources", {}),
        "recommendation": (run.metadata.get("recommendation") or {}).get("describe"),
        "outputs_differing_from_AR": run.metadata.get("outputs_differing_from_AR"),
        "median_prediction_error": run.metadata.get("median_prediction_error"),
        "cpu": run.metadata.get("cpu", {}).get("model"),
        "prompts": run.prompts,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", nargs="+", choices=sorted(FAMILIES), default=["qwen05"])
    p.add_argument("--categories", nargs="+", default=["edit", "rag"])
    p.add_argument("--measure-prompts", type=int, default=4)
    p.add_argument("--limit", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--k-max", type=int, default=12)
    p.add_argument("--out", type=Path, default=Path("out") / "reach")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    report = {}
    for family in args.family:
        keys = FAMILIES[family]
        sources = fetch_weights.model_dirs(keys)
        for category in args.categories:
            started = time.perf_counter()
            run = run_pipeline(
                sources,
                names=keys,
                mag=True,
                prompts=category,
                measure_prompts=args.measure_prompts,
                limit=args.limit,
                max_new_tokens=args.max_new_tokens,
                device="cpu",
                dtype=args.dtype,
                threads=args.threads,
                k_max=args.k_max,
                family_label=f"{'>'.join(keys)}+mag on {category}",
            )
            run = replace(
                run,
                metadata={
                    **run.metadata,
                    "prompt_set": category,
                    "total_seconds": time.perf_counter() - started,
                },
            )
            results_io.save(run, args.out / f"reach_{family}_{category}.json")
            print(format_results(run))
            report[f"{family}/{category}"] = summary(run) | {
                "seconds": round(run.metadata["total_seconds"], 1)
            }
    (args.out / "speculation_reach.json").write_text(json.dumps(report, indent=2) + "\n")
    print(
        json.dumps(
            {
                name: [(m["name"], m["speedup"] and round(m["speedup"], 3)) for m in r["methods"]]
                for name, r in report.items()
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
