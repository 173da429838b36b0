"""Token trees: the best tree (Theorem TO) and the joint tree + K search, timed in one run.

1. ``best_tree`` for 64 nodes, depth 10 and ``R = 8`` ranks (a decreasing vector): the median
   of 50 runs (the goal: <= 0.5 s), and the whole table of every size and depth it builds;
2. the joint tree + K search (:func:`ewif.search.tree_search.optimize_trees`, default bounds:
   budgets 0..8, trees of <= 32 nodes and depth <= 8, <= 7 siblings) on the shipped Qwen model
   set ``realrun/data/models_qwen.json`` — as shipped (``csd.models/3``: no rank vectors, so
   every tree is a chain) and with an ASSUMED rank vector on every pair (geometric ranks,
   ``p_b = α·(1 − α)^(b−1)``, ``b = 1..8``: the search's full space); the goal:
   <= 10 s; and the chain optimizer (``csd recommend``'s) on the same space for comparison;
3. the same search on the ``sequoia-a100`` preset (one drafter, flat GPU-like curve).

Run: ``/work/tools/cpu-exclusive .venv/bin/python benchmarks/bench_trees.py``.
"""

from __future__ import annotations

import dataclasses
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from ewif.files.model_set import ModelSet, load
from ewif.files.presets import load_preset
from ewif.files.rank_acceptance import RankAcceptance
from ewif.search.best_tree import best_tree
from ewif.search.optimizer import optimize
from ewif.search.tree_search import optimize_trees

QWEN = Path(__file__).resolve().parent.parent / "realrun" / "data" / "models_qwen.json"


def assumed_ranks(ms: ModelSet, size: int = 8) -> ModelSet:
    """``ms`` with the ASSUMED vector of the module docstring on every measured pair."""
    vectors = {}
    for lenience, alpha in ms.alpha.items():
        n = alpha.shape[0]
        for r in range(n):
            for j in range(r + 1, n):
                a = float(alpha[r, j])
                if not np.isnan(a):
                    vectors[lenience, r, j] = [a * (1 - a) ** b for b in range(size)]
    return dataclasses.replace(ms, rank_acceptance=RankAcceptance(vectors))


def timed(fn, runs: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}"
    )
    p = [0.5, 0.15, 0.08, 0.05, 0.04, 0.03, 0.02, 0.01]
    seconds, best = timed(lambda: best_tree(p, 64, 10), 50)
    print(
        f"1. best_tree(R = 8, nodes = 64, depth = 10): median {seconds * 1e3:.2f} ms of 50 runs "
        f"(goal <= 500 ms); E[tokens] {best.value:.4f}, {best.tree.size} nodes, depth "
        f"{best.tree.height}"
    )
    shipped = load(QWEN)
    for label, ms in (
        ("as shipped (no rank vectors)", shipped),
        ("ASSUMED R = 8 vectors", assumed_ranks(shipped)),
    ):
        seconds, result = timed(lambda ms=ms: optimize_trees(ms), 3)
        print(
            f"2. tree + K search, Qwen set {label}: median {seconds:.2f} s of 3 runs "
            f"(goal <= 10 s), {result.n_configurations:,} configurations; decision "
            f"{result.decision}: "
            f"{result.best.describe()}"
        )
        if result.best_tree is not None:
            print(f"   best tree: {result.best_tree.describe()}")
    seconds, chain = timed(lambda: optimize(shipped, bounds=(0, 8), subsets=False), 3)
    print(f"   chain optimizer, same K space: median {seconds:.2f} s, EWIF {chain.best.ewif:.4f}")
    seconds, result = timed(lambda: optimize_trees(load_preset("sequoia-a100")), 3)
    print(
        f"3. sequoia-a100 preset: median {seconds:.2f} s; decision {result.decision}: "
        f"{result.best.describe()}; best chain {result.best_chain.describe()}"
    )


if __name__ == "__main__":
    main()
