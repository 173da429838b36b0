"""Batch-aware speculative decoding: the exact throughput ratio of plain SD against AR at batch
size B, the best draft length for every B, and the schedule as ranges of B.

A synchronized batch of ``B`` independent rows (a serving engine's running requests) drafts
``k`` tokens per row per step with one drafter ``d`` and verifies all rows in one target
pass. Under the Bernoulli model rows are independent, so the tokens a row gains per step are
unchanged, ``E[T] = Σ_{i=0}^{k} α^i``; what changes with ``B`` is the price of a pass, which
is read off each model's cost curve at the **total positions of the batched pass** (a
batch-1 curve is the special case ``B = 1``):

* the target: one pass over ``B·(k+1)`` positions;
* a neural drafter: ``k`` batched passes. With its catch-up pass (:mod:`ewif.catch_up`) the
  first feeds ``Σ_rows m_row`` positions, ``m_row`` i.i.d. with the one-row law ``f`` of
  :meth:`ewif.cascade.Cascade.first_pass_sizes` (SD: ``m = 2`` with probability ``α^k``), so
  its expected cost is ``Σ_M f^{*B}(M)·c_d(M)`` with ``f^{*B}`` the ``B``-fold convolution;
  the other ``k − 1`` feed one position per row, ``c_d(B)`` each (without catch-up all ``k``);
* a proposer (Max-Gram; :func:`is_proposer`): ``k·B`` proposals at ``c_d(1)`` each (it runs
  row by row).

AR at the same ``B`` makes one pass over ``B`` positions per ``B`` tokens, so

    ratio(B, k) = E[T]·c_0(B) / (c_0(B·(k+1)) + drafter cost(B, k)),   ratio(B, 0) = 1.

:func:`batch_ratio` is this exactly; :func:`best_draft_lengths` maximises it over
``k = 0..k_max`` for each ``B`` (``k = 0``: do not speculate); :func:`schedule` merges equal
choices into ranges of ``B``. Cascades with nested review calls stay batch 1: their rows
would need review calls of different lengths in one batched pass, which this model does not
price.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ewif import validate
from ewif._numerics import pmf_power

if TYPE_CHECKING:
    from ewif.io import ModelSet


def batch_ratio(
    model_set: ModelSet, drafter: str, k: int, batch: int, catch_up: bool | None = None
) -> float:
    """``ratio(B, k)`` of the module docstring for plain SD with ``drafter`` (``k = 0`` is
    AR, 1). ``catch_up`` defaults to the set's flag for the drafter (False if it has none)."""
    from ewif.cascade import Cascade

    k = validate.count("k", k)
    b = validate.count("batch", batch, minimum=1)
    if k == 0:
        return 1.0
    target, j = model_set.models[0], model_set.index(drafter)
    if j == 0:
        raise ValueError(
            f"drafter must be one of the drafters {list(model_set.models[1:])}, "
            f"got the target {drafter!r}"
        )
    if catch_up is None:
        catch_up = bool(model_set.catch_up[j]) if model_set.catch_up is not None else False
    proposer = is_proposer(model_set, drafter)
    if catch_up and proposer:
        raise ValueError(f"catch_up applies to KV-cached drafters; {drafter!r} is a proposer")
    sd = Cascade.from_model_set(model_set, [target, drafter], [[k]], catch_up=[False, catch_up])
    price = model_set.pass_cost
    tokens = sd.expected_tokens()
    cost = float(price.at(0, b * (k + 1)))
    if catch_up:
        total = pmf_power(sd.first_pass_sizes(1), b)
        sizes = np.flatnonzero(total > 0)
        cost += float(total[sizes] @ price.at(j, sizes)) + (k - 1) * float(price.at(j, b))
    elif proposer:
        cost += k * b * float(price.at(j, 1))
    else:
        cost += k * float(price.at(j, b))
    return tokens * float(price.at(0, b)) / cost


def is_proposer(model_set: ModelSet, name: str) -> bool:
    """Whether ``name`` is a proposer (Max-Gram, bigram) rather than a neural model: the
    measurement records a proposer's timing as ``seconds_per_token``; a set without timing
    metadata (a preset) treats a drafter of zero cost as a proposer."""
    timing = model_set.metadata.get("timing", {})
    if name in timing:
        return "seconds_per_token" in timing[name]
    return float(model_set.pass_cost.at(model_set.index(name), 1)) == 0.0


@dataclass(frozen=True)
class BatchChoice:
    """The best draft length ``k`` (0: do not speculate) at batch size ``batch`` and its
    throughput ratio against AR at that batch size."""

    batch: int
    k: int
    ratio: float


def best_draft_lengths(
    model_set: ModelSet,
    drafter: str,
    batch_sizes: Sequence[int],
    k_max: int = 12,
    catch_up: bool | None = None,
) -> list[BatchChoice]:
    """For every ``B`` of ``batch_sizes`` the ``k ∈ 0..k_max`` of the highest
    :func:`batch_ratio` (ties: the smaller ``k``)."""
    k_max = validate.count("k_max", k_max, minimum=1)
    sizes = [validate.count("batch size", b, minimum=1) for b in batch_sizes]
    if not sizes:
        raise ValueError("batch_sizes must hold at least one batch size")
    out = []
    for b in sizes:
        ratios = [batch_ratio(model_set, drafter, k, b, catch_up) for k in range(k_max + 1)]
        k = int(np.argmax(ratios))
        out.append(BatchChoice(b, k, float(ratios[k])))
    return out


@dataclass(frozen=True)
class ScheduleRange:
    """Batch sizes ``low..high`` (of the ones asked) that share the draft length ``k``."""

    low: int
    high: int
    k: int


def schedule(choices: Sequence[BatchChoice]) -> list[ScheduleRange]:
    """Consecutive choices (by batch size) with the same ``k`` merged into ranges."""
    ranges: list[ScheduleRange] = []
    for c in sorted(choices, key=lambda c: c.batch):
        if ranges and ranges[-1].k == c.k:
            ranges[-1] = ScheduleRange(ranges[-1].low, c.batch, c.k)
        else:
            ranges.append(ScheduleRange(c.batch, c.batch, c.k))
    return ranges
