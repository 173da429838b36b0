"""A numerics search's tie, settled side by side: the choice against every candidate it
predicted faster, each with its own recommended configuration, on the run's held-out prompts.

When the numerics search ends with candidates within their errors of its choice (the report's
``faster, not chosen`` and ``uncertain`` lines, :mod:`realrun.numerics`), which one really runs
fastest is a question for a measurement, not for more timing rounds. This script reads a
results file made with the search (``realrun/data/cpu_results_qwen_xeon.json`` by default),
takes its choice and every candidate it predicted faster than the choice, each with the
configuration the search recommended for it (a cascade, or AR), adds the choice's own AR (the
run's baseline), and runs them on the run's held-out prompts in one process, the arms rotated
per prompt (:func:`choice_side_by_side.rotated_totals`), so a drift of the machine's speed hits
every arm alike. It reports each arm's tokens/s, the search's predicted tokens/s beside it, and
each arm over the choice.

Run: ``.venv/bin/python benchmarks/tied_numerics.py [--source FILE] [--limit 16] [--out DIR]``
(weights from ``benchmarks/fetch_weights.py``; under ``/work/tools/cpu-exclusive`` on a shared
machine). Writes ``tied_numerics_<family>.json`` under ``--out`` with the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
from choice_side_by_side import rotated_totals
from realrun_cpu import FAMILIES

from ewif.files import results as results_io
from ewif.files.model_set import ModelSet
from realrun.family import load_family
from realrun.methods import Method, cascade_method
from realrun.pipeline import cpu_description, split_prompts

DATA = Path(__file__).resolve().parents[1] / "realrun" / "data"


def candidate_method(trial: dict, target: str) -> Method:
    """The method a numerics trial's recommendation decodes with: its cascade, or AR."""
    rec = trial["recommendation"]
    if rec["decision"] == "autoregressive":
        return Method("AR", "autoregressive", (target,))
    config = rec["config"]
    return cascade_method(
        rec["best_speculative"], "csd", config["models"], config["K"], config["lenience"]
    )


def tied_arms(trials: list[dict], target: str) -> list[tuple[str, Method, float]]:
    """(dtype, method, predicted tokens/s) of the choice, of every candidate at the choice's
    thread count predicted faster than it, and of the choice's AR."""
    (choice,) = [t for t in trials if t.get("excluded_by") is None]
    faster = [
        t
        for t in trials
        if t is not choice
        and t["threads"] == choice["threads"]
        and (t.get("predicted_tokens_per_s") or 0.0) > choice["predicted_tokens_per_s"]
    ]
    arms = [
        (t["dtype"], candidate_method(t, target), t["predicted_tokens_per_s"])
        for t in [choice, *faster]
    ]
    ar = Method("AR", "autoregressive", (target,))
    return [*arms, (choice["dtype"], ar, 1.0 / choice["ar_seconds_per_token"])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=DATA / "cpu_results_qwen_xeon.json")
    p.add_argument("--family", choices=sorted(FAMILIES), default="qwen")
    p.add_argument("--limit", type=int, default=None, help="held-out prompts (default all)")
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    run = results_io.load(args.source)
    meta = run.metadata
    model_set = ModelSet.from_dict(meta["model_set"], str(args.source))
    trials = meta["model_set"]["metadata"]["numerics_trials"]
    _, keys = FAMILIES[args.family]
    arms = tied_arms(trials, keys[0])
    measuring = len(meta["measuring_prompt_ids"])
    held_ids = meta["held_out_prompt_ids"][: args.limit]
    _, held = split_prompts(
        meta["prompt_set"],
        measuring,
        len(held_ids),
        held_out_categories=meta.get("held_out_categories", ()),
    )
    assert [q.id for q in held] == held_ids, "the source's held-out prompts are not reproduced"
    sources = fetch_weights.model_dirs(keys)
    families = {
        d: load_family(sources, mag=True, device="cpu", dtype=d, names=keys)
        for d in dict.fromkeys(d for d, _, _ in arms)
    }
    threads = int(meta["threads"])
    started = time.perf_counter()
    totals = rotated_totals(
        [(d, m) for d, m, _ in arms], families, held, model_set, run.max_new_tokens, threads
    )
    speed = {arm: tokens / seconds for arm, (tokens, seconds) in totals.items()}
    choice = f"{arms[0][0]} {arms[0][1].name}"
    predicted = {f"{d} {m.name}": value for d, m, value in arms}
    record = {
        "source": args.source.name,
        "held_out_prompts": held_ids,
        "threads": threads,
        "choice": choice,
        "tokens_and_seconds": totals,
        "tokens_per_s": speed,
        "predicted_tokens_per_s": predicted,
        "over_choice": {arm: value / speed[choice] for arm, value in speed.items()},
        "fastest": max(speed, key=speed.__getitem__),
        "seconds": time.perf_counter() - started,
        "cpu": cpu_description(),
    }
    for arm, value in speed.items():
        print(
            f"{arm:<50} {value:7.3f} tokens/s  (predicted {predicted[arm]:.3f}; "
            f"{record['over_choice'][arm]:.3f} of the choice)"
        )
    print(f"fastest: {record['fastest']}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"tied_numerics_{args.family}.json"
    path.write_text(json.dumps(record, indent=2))
    print(json.dumps({"results": str(path), "total_s": round(record["seconds"], 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
