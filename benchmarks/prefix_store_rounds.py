"""Timing rounds with and without the prefix store, side by side on one family.

A timing round (:func:`realrun.timing.time_family`) starts on one of the measuring prompts
and prefills it, outside the clock, for every neural model; the prefix store
(:mod:`realrun.prefix_store`) keeps each prefill and restores it when the prompt comes back.
This runs the same rounds in two arms, alternating within each prompt (the order rotated per
round): ``kept`` (the models' stores, warm from generating each prompt's continuation, as the
acceptance stage leaves them) and ``anew`` (no store; caches emptied first, as a new prompt
finds them). It reports each arm's wall seconds per round and what the rounds timed — the AR
unit and the target's and first drafter's mean passes — so the saving is shown not to move
the costs.

Run: ``.venv/bin/python benchmarks/prefix_store_rounds.py [--family qwen] [--dtype float16]
[--rounds 8] [--out DIR]`` (weights as ``benchmarks/fetch_weights.py`` caches them).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import fetch_weights
import numpy as np
from realrun_cpu import FAMILIES
from tqdm.auto import tqdm

from realrun.ar import ar_timer
from realrun.family import load_family, set_threads
from realrun.pass_timing import FamilyTiming, PassTiming
from realrun.pipeline import cpu_description, split_prompts
from realrun.prompts import encode
from realrun.timing import time_family
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.interface import TokenModel
from simulate.decoder.sampling import Decoding

ARMS = ("kept", "anew")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), default="qwen")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=8, help="rounds per arm (default 8)")
    p.add_argument("--limit", type=int, default=8, help="measuring prompts (default 8)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--max-m", type=int, default=24, help="as the search's k_max 12 (default 24)")
    p.add_argument("--out", type=Path, default=Path("out"))
    args = p.parse_args(argv)
    _, keys = FAMILIES[args.family]
    sources = fetch_weights.model_dirs(keys)
    family = load_family(sources, mag=True, device="cpu", dtype=args.dtype, names=keys)
    set_threads(family, args.threads)
    neural = [m for m in family.chain if isinstance(m, TokenModel)]
    eos, decoding = family.tokenizer.eos_token_id, Decoding()
    ar = ar_timer(neural[0], decoding, eos)
    greedy = CascadeDecoder(neural[:1], np.zeros((0, 0), np.int64), decoding=decoding)
    measuring, _ = split_prompts("all", args.limit, None, held_out=False)
    pairs = []
    for prompt in tqdm(measuring, desc="continuations", unit="prompt"):
        ids = encode(prompt, family.tokenizer)
        for m in neural:  # every model's prefill, as the acceptance stage leaves them
            m.logits(ids, 1)
        pairs.append((ids, greedy.generate(ids, args.max_new_tokens, eos).tokens))
    stores = [m.prefix_store for m in neural]
    walls: dict[str, list[float]] = {a: [] for a in ARMS}
    timed: dict[str, list] = {a: [] for a in ARMS}
    started = time.perf_counter()
    for r in tqdm(range(args.rounds), desc="rounds", unit="round"):
        for arm in ARMS[r % 2 :] + ARMS[: r % 2]:
            for m, store in zip(neural, stores, strict=True):
                m.prefix_store = store if arm == "kept" else None
                m.reset()
            start = time.perf_counter()
            timing = time_family(neural, [pairs[r % len(pairs)]], args.max_m, ar=ar,
                                 decoding=decoding, rounds=1, warmup=0,
                                 ar_tokens=args.max_new_tokens, seed=r)  # fmt: skip
            walls[arm].append(time.perf_counter() - start)
            timed[arm].append(timing)
    record = _record(args, keys, walls, timed, time.perf_counter() - started)
    for arm in ARMS:
        print(f"{arm:<5} {record['wall_s_per_round'][arm]:6.2f} s/round  " + "  ".join(
            f"{k} {v * 1e3:7.1f} ms" for k, v in record["timed_s"][arm].items()))  # fmt: skip
    print(f"kept / anew wall: {record['kept_over_anew_wall']:.3f}; timed, paired by round: "
          + ", ".join(f"{k} {v['ratio']:.3f} (± {v['log_se']:.3f})"
                      for k, v in record["kept_over_anew_timed"].items()))  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"prefix_store_rounds_{args.family}.json"
    path.write_text(json.dumps(record, indent=2))
    print(json.dumps({"results": str(path), "total_s": round(record["seconds"], 1)}))
    return 0


def _at(timing: PassTiming, m: int) -> float:
    """The mean seconds of ``timing``'s pass over ``m`` positions."""
    return timing.seconds[timing.m.index(m)]


def _costs(t: FamilyTiming, keys: list[str]) -> dict[str, float]:
    """One round's AR unit and the target's and first drafter's passes over m = 1, 2 (s)."""
    row = {"AR unit": sum(t.ar_seconds) / sum(t.ar_tokens)}
    for name in keys[:2]:
        for m in (1, 2):
            row[f"{name} m={m}"] = _at(t.passes[name], m)
    return row


def _record(args, keys, walls, timed, seconds: float) -> dict:
    """Each arm's wall per round and its rounds' AR unit and mean passes, with the paired
    ratio kept/anew of each (geometric mean over rounds, its standard error in log units)."""
    rounds = {arm: [_costs(t, keys) for t in timed[arm]] for arm in ARMS}
    names = list(rounds["kept"][0])
    costs = {arm: {k: float(np.mean([r[k] for r in rounds[arm]])) for k in names} for arm in ARMS}
    paired = {}
    for k in names:
        logs = np.log([a[k] / b[k] for a, b in zip(rounds["kept"], rounds["anew"], strict=True)])
        se = float(logs.std(ddof=1) / np.sqrt(logs.size)) if logs.size > 1 else float("nan")
        paired[k] = {"ratio": float(np.exp(logs.mean())), "log_se": se}
    wall = {arm: float(np.mean(walls[arm])) for arm in ARMS}
    return {
        "family": args.family,
        "models": list(keys),
        "dtype": args.dtype,
        "threads": args.threads,
        "max_m": args.max_m,
        "rounds_per_arm": args.rounds,
        "wall_s_per_round": wall,
        "wall_s_by_round": walls,
        "timed_s": costs,
        "timed_s_by_round": rounds,
        "kept_over_anew_wall": wall["kept"] / wall["anew"],
        "kept_over_anew_timed": paired,
        "seconds": seconds,
        "cpu": cpu_description(),
    }


if __name__ == "__main__":
    raise SystemExit(main())
