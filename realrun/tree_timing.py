"""Tree-shaped passes timed against chain passes of the same size, the way a run feeds them.

ewif prices a tree pass of ``m`` positions at the model's measured curve ``c(m)``, which
:mod:`realrun.timing` times with chain-shaped passes. A tree pass differs in its mask (tree
attention, :mod:`realrun.tree_pass`), its position ids and what follows it: the next call
keeps the accepted path only (a cache compaction on transformers, sequence operations on
llama.cpp). :func:`time_tree_passes` measures whether that changes the price: in rounds
cycling through the measuring contexts, every neural model feeds, for each ``m`` of the
curve's grid (``m >= 2``), one chain pass (``m`` fresh positions, ``m`` rows, as the curve)
and one tree pass (the unfed last token and ``m − 1`` nodes of a bushy tree — each node's
parent ``⌊v/2⌋ − 1``, so the root has two children — ``m`` rows, then the compaction to its
first-child path, inside the clock), in one shuffled order, so a drift of the machine hits
both alike. :class:`TreePassTiming` keeps both timings and the paired ratio per ``m``: a ratio
near 1 says the chain curve prices tree passes.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from ewif.base import validate
from realrun.pass_timing import PassTiming, grid
from realrun.prompts import encode

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet
    from realrun.family import Family
    from realrun.prompts import Prompt

__all__ = ["TreePassTiming", "bushy_parents", "time_tree_passes", "tree_pass_timing"]


def bushy_parents(nodes: int) -> list[int]:
    """Parents (``-1``: the root) of the timing's tree of ``nodes`` nodes: node ``v`` under
    ``⌊v/2⌋ − 1`` — two children per node, breadth first."""
    return [v // 2 - 1 for v in range(validate.count("nodes", nodes))]


@dataclass(frozen=True)
class TreePassTiming:
    """One model's chain and tree passes by ``m`` (seconds, same rounds) and, per ``m``, the
    mean paired ratio tree/chain with its standard error."""

    chain: PassTiming
    tree: PassTiming

    def ratios(self) -> tuple[np.ndarray, np.ndarray]:
        """``(mean, stderr)`` of ``tree/chain`` per ``m`` over the paired rounds."""
        means, errors = [], []
        for a, b in zip(self.tree.samples, self.chain.samples, strict=True):
            r = np.asarray(a) / np.asarray(b)
            means.append(float(r.mean()))
            errors.append(float(r.std(ddof=1) / np.sqrt(r.size)) if r.size > 1 else 0.0)
        return np.array(means), np.array(errors)

    def to_dict(self) -> dict:
        mean, se = self.ratios()
        return {
            "m": list(self.chain.m),
            "chain_seconds": list(self.chain.seconds),
            "tree_seconds": list(self.tree.seconds),
            "ratio": mean.tolist(),
            "ratio_stderr": se.tolist(),
            "mean_ratio": float(mean.mean()),
        }


def time_tree_passes(
    models: Sequence,
    contexts: Sequence[Sequence[int]],
    max_m: int,
    *,
    rounds: int = 6,
    warmup: int = 1,
    seed: int = 0,
    progress: Callable[[], object] | None = None,
) -> dict[str, TreePassTiming]:
    """Chain and tree passes of every model (neural, with ``tree_logits`` and ``settle``)
    for every ``m`` of :func:`realrun.timing.grid` ``(max_m)`` from 2, ``rounds`` rounds after
    ``warmup`` untimed ones, cycling through ``contexts`` (module docstring)."""
    ms = [m for m in grid(max_m) if m >= 2]
    if not ms:
        raise ValueError(f"max_m must be at least 2 to time a tree pass, got {max_m}")
    rounds = validate.count("rounds", rounds, minimum=1)
    warmup = validate.count("warmup", warmup)
    ctxs = [[int(t) for t in c] for c in contexts]
    if not ctxs or not all(ctxs):
        raise ValueError("contexts must hold at least one non-empty token list")
    rng = random.Random(seed)
    seconds = {key: [] for key in itertools.product(range(len(models)), ms, ("chain", "tree"))}

    def timed(i: int, m: int, kind: str, ctx: list[int]) -> float:
        model = models[i]
        fresh = [rng.randrange(model.vocab_size) for _ in range(m)]
        start = time.perf_counter()
        if kind == "chain":
            model.logits(ctx + fresh, m)
        else:
            parents = bushy_parents(m - 1)
            model.tree_logits(ctx + fresh[:1], fresh[1:], parents)
            model.settle(ctx + fresh[:1] + [fresh[1 + v] for v in _first_children(parents)])
        return time.perf_counter() - start

    for r in range(warmup + rounds):
        ctx = ctxs[r % len(ctxs)]
        for model in models:  # prefill outside the clock, as a run does
            model.logits(ctx, 1)
        order = list(seconds)
        rng.shuffle(order)
        done = {key: timed(*key, ctx) for key in order}
        if r < warmup:
            continue
        for key, value in done.items():
            seconds[key].append(value)
        if progress is not None:
            progress()
    return {
        model.name: TreePassTiming(
            PassTiming.of(ms, [seconds[(i, m, "chain")] for m in ms]),
            PassTiming.of(ms, [seconds[(i, m, "tree")] for m in ms]),
        )
        for i, model in enumerate(models)
    }


def _first_children(parents: Sequence[int]) -> list[int]:
    """The path from the root along first children (the accepted path the timing keeps)."""
    path, v = [], -1
    while True:
        nxt = next((c for c, p in enumerate(parents) if p == v), None)
        if nxt is None:
            return path
        path.append(nxt)
        v = nxt


def tree_pass_timing(
    family: Family, measuring: Sequence[Prompt], model_set: ModelSet, progress: bool = True
) -> dict:
    """Tree-shaped against chain-shaped passes of every neural model of ``family`` on the
    measuring prompts, up to the curves' largest ``m`` (:func:`time_tree_passes`)."""
    neural = [m for m in family.chain if hasattr(m, "tree_logits")]
    max_m = max(c.size for c in model_set.cost_curve) if model_set.cost_curve else 2
    contexts = [encode(p, family.tokenizer) for p in measuring]
    with tqdm(total=6, desc="tree passes", unit="round", disable=not progress) as bar:
        found = time_tree_passes(neural, contexts, max(max_m, 2), progress=bar.update)
    return {name: t.to_dict() for name, t in found.items()}
