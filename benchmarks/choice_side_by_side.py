"""The two numerics choice rules' choices, side by side on held-out prompts: which runs faster?

A numerics search ranks its candidates by the ``mean`` rule (predicted throughput) or the
``assured`` rule (its one-sided 95 % lower bound over the drafts' acceptance;
:mod:`realrun.numerics_choice`). On the Qwen 1.5B > 0.5B > Max-Gram family the two differ
(``realrun/data/qwen_bfloat16_searched.json``, made under the mean rule): the mean rule chose
bfloat16 × 2 threads decoding with the recommended cascade, the assured rule float16 × 2 threads
decoding autoregressively. This script runs both choices — and bfloat16's AR, the cascade's own
baseline — in one process on that run's held-out prompts, the arms rotated per prompt
(:func:`realrun.side_by_side.run_side_by_side` on one prompt at a time per family), so a drift
of the machine's speed hits every arm alike, and reports each arm's tokens/s over all prompts
and their ratios. The cascade is the one that file's search recommended (its ``K`` and
lenience, read from the file), priced with that file's model set.

Run: ``.venv/bin/python benchmarks/choice_side_by_side.py [--limit 16] [--out DIR]`` (weights
from ``benchmarks/fetch_weights.py``; under ``/work/tools/cpu-exclusive`` on a shared machine).
Writes ``choice_side_by_side_qwen.json`` under ``--out`` with the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
from realrun_cpu import FAMILIES
from tqdm.auto import tqdm

from ewif.files import results as results_io
from ewif.files.model_set import ModelSet
from realrun.family import Family, load_family, set_threads
from realrun.methods import Method, cascade_method
from realrun.pipeline import cpu_description, split_prompts
from realrun.prompts import Prompt, encode
from realrun.side_by_side import run_side_by_side

DATA = Path(__file__).resolve().parents[1] / "realrun" / "data"
SOURCE = DATA / "qwen_bfloat16_searched.json"


def the_cascade(run: results_io.Results) -> Method:
    """The csd method the source run's search recommended (its K and lenience)."""
    (csd,) = [m for m in run.methods if m.kind == "csd"]
    config = csd.config
    return cascade_method(csd.name, "csd", config["models"], config["K"], config["lenience"])


def rotated_totals(
    arms: list[tuple[str, Method]],
    families: dict[str, Family],
    held: list[Prompt],
    model_set: ModelSet,
    max_new_tokens: int,
    threads: int,
) -> dict[str, list[float]]:
    """Each arm ``(dtype, method)`` on every prompt, one prompt at a time, the arms' order
    rotated per prompt (so a drift of the machine's speed hits every arm alike); per arm
    ``"dtype name"``: [tokens, seconds] summed over the prompts."""
    totals: dict[str, list[float]] = {f"{d} {m.name}": [0, 0.0] for d, m in arms}
    for i, prompt in enumerate(tqdm(held, desc="prompts", unit="prompt")):
        for dtype, method in arms[i % len(arms) :] + arms[: i % len(arms)]:
            family = families[dtype]
            set_threads(family, threads)
            one = run_side_by_side(
                [method],
                {m.name: m for m in family.chain},
                [encode(prompt, family.tokenizer)],
                model_set=model_set,
                max_new_tokens=max_new_tokens,
                eos_token_id=family.tokenizer.eos_token_id,
                progress=False,
            )
            (measured,) = one.methods
            totals[f"{dtype} {method.name}"][0] += measured.tokens
            totals[f"{dtype} {method.name}"][1] += measured.seconds
    return totals


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=16, help="held-out prompts (default 16)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads of both arms")
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    run = results_io.load(SOURCE)
    model_set = ModelSet.from_dict(run.metadata["model_set"], str(SOURCE))
    measuring = len(run.metadata["measuring_prompt_ids"])
    _, held = split_prompts("all", measuring, args.limit)
    assert [q.id for q in held] == run.metadata["held_out_prompt_ids"][: args.limit]
    _, keys = FAMILIES["qwen"]
    sources = fetch_weights.model_dirs(keys)
    families = {d: load_family(sources, mag=True, device="cpu", dtype=d, names=keys)
                for d in ("float16", "bfloat16")}  # fmt: skip
    ar = Method("AR", "autoregressive", (keys[0],))
    arms = [("float16", ar), ("bfloat16", ar), ("bfloat16", the_cascade(run))]
    started = time.perf_counter()
    totals = rotated_totals(arms, families, held, model_set, run.max_new_tokens, args.threads)
    speed = {arm: tokens / seconds for arm, (tokens, seconds) in totals.items()}
    mean_choice, assured_choice = f"bfloat16 {arms[2][1].name}", "float16 AR"
    record = {
        "source": SOURCE.name,
        "held_out_prompts": [q.id for q in held],
        "threads": args.threads,
        "tokens_and_seconds": totals,
        "tokens_per_s": speed,
        "mean_rule_choice": mean_choice,
        "assured_rule_choice": assured_choice,
        "assured_over_mean": speed[assured_choice] / speed[mean_choice],
        "cascade_over_its_ar": speed[mean_choice] / speed["bfloat16 AR"],
        "seconds": time.perf_counter() - started,
        "cpu": cpu_description(),
    }
    for arm, value in speed.items():
        print(f"{arm:<45} {value:7.3f} tokens/s")
    print(f"assured rule's choice / mean rule's choice: {record['assured_over_mean']:.3f}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "choice_side_by_side_qwen.json"
    path.write_text(json.dumps(record, indent=2))
    print(json.dumps({"results": str(path), "total_s": round(record["seconds"], 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
