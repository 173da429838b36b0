"""Monte Carlo witness of :mod:`ewif.predict.batch`: ``B`` independent rows of plain SD, step by
step.

Each row draws its acceptances (i.i.d. Bernoulli α, the first rejection ends the review) and
keeps its own catch-up state: a neural drafter's first pass of a step feeds 2 positions in a
row whose previous step accepted the whole draft (its last draft token and the bonus), else 1
— tracked per row, not taken from the exact law. Every step is priced like the engine pays
it (:func:`_price`: the set's batched curves ``c(B, m)``, else the batch-1 curve at the total
positions, read from the model set's data, :mod:`simulate.prices`): the target's batched pass
over ``B`` rows of ``k + 1``, the drafter's batched passes over the rows' summed positions
(``drafting="kv-cached"``) or its ``k`` one-position passes and the pass over the target's
batch (``"reevaluate"``), a proposer's ``k·B`` proposals. The ratio against AR at batch
``B`` is ``(tokens per row per step)·c_0(B) / (cost per step)``, estimated over blocks of
steps (a row's catch-up couples consecutive steps; blocks make the pairs nearly independent)
with the delta method.

:func:`simulate_vllm_sd` witnesses ``drafting="vllm"`` the same way, step by step: a draft
model's rows each draft ``k`` (Bernoulli α acceptances) and the step is priced from the
shapes vLLM runs — the target over ``B(k+1)`` positions, the drafter's first pass of
``k + 2`` and ``k − 1`` one-position passes, the host overhead — read from a vLLM profile's
tables (or the set's curves); an n-gram row draws whether it found a match (probability
``q``) and then its acceptances position by position (``α_i``), and the step's target pass
is read at the positions the rows really carried, ``B + k·(rows with a match)``.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ewif.base import validate
from simulate.prices import Prices
from simulate.stats import Estimate, ratio_estimate

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet

#: How an engine runs a neural drafter at batch size ``B``: its own batched passes over the
#: rows' positions, or ``k`` one-position passes and one over the target's batch.
DRAFTING = ("kv-cached", "reevaluate")


def simulate_batch_sd(
    model_set: ModelSet,
    drafter: str,
    k: int,
    batch: int,
    *,
    steps: int = 20_000,
    block: int = 50,
    catch_up: bool = True,
    drafting: str = "kv-cached",
    seed: int = 0,
    level: float = 0.999,
) -> Estimate:
    """The simulated ``ratio(B, k)`` of :func:`ewif.predict.batch.batch_ratio` and its interval."""
    if drafting not in DRAFTING:
        raise ValueError(f"drafting must be one of {', '.join(DRAFTING)}, got {drafting!r}")
    k = validate.count("k", k, minimum=1)
    b = validate.count("batch", batch, minimum=1)
    steps = validate.count("steps", steps, minimum=2)
    block = validate.count("block", block, minimum=1)
    j = model_set.index(drafter)
    alpha = float(model_set.alpha[1.0][0, j])
    prices = Prices.of(model_set)
    proposer = _proposes(model_set, j, prices)
    pass_price = partial(_price, model_set, prices)
    rng = np.random.default_rng(validate.count("seed", seed))
    caught_up = np.zeros(b, dtype=bool)  # no row owes a catch-up before the first step
    tokens = np.zeros(steps)
    cost = np.zeros(steps)
    for s in range(steps + 1):
        ok = rng.random((b, k)) < alpha
        accepted = np.where(ok.all(axis=1), k, np.argmin(ok, axis=1))
        step_cost = pass_price(0, b, k + 1)
        if proposer:
            step_cost += k * b * pass_price(j, 1, 1)
        elif drafting == "reevaluate":
            step_cost += k * pass_price(j, b, 1)
            step_cost += pass_price(j, b, k + 1, one_output=True)
        elif catch_up:
            first = pass_price(j, b, (b + int(caught_up.sum())) / b)
            step_cost += first + (k - 1) * pass_price(j, b, 1)
        else:
            step_cost += k * pass_price(j, b, 1)
        caught_up = accepted == k
        if s:  # step 0 is a burn-in: it sets every row's catch-up state
            tokens[s - 1] = (accepted + 1).mean()
            cost[s - 1] = step_cost
    n = steps // block
    x = tokens[: n * block].reshape(n, block).sum(axis=1) * pass_price(0, b, 1)
    y = cost[: n * block].reshape(n, block).sum(axis=1)
    return ratio_estimate(x.sum(), y.sum(), x @ x, y @ y, x @ y, n, level)


def _price(
    model_set: ModelSet, prices: Prices, i: int, rows: int, m: float, one_output: bool = False
) -> float:
    """``c_i(B = rows, m)``: the set's measured batched curves read as the file states them
    (:meth:`ewif.files.batch_costs.BatchCosts.at`; ``one_output``, the pass with one logit
    row in all), else the batch-1 price of the ``B·m`` positions, linear between whole
    numbers of positions."""
    if model_set.batch_costs is not None:
        return model_set.batch_costs.at(i, rows, m, one_output)
    total = rows * m
    if abs(total - round(total)) < 1e-9:
        return float(prices.at(i, round(total)))
    low = int(np.floor(total))
    return float(np.interp(total, [low, low + 1], [prices.at(i, low), prices.at(i, low + 1)]))


def _proposes(model_set: ModelSet, j: int, prices: Prices) -> bool:
    """Whether drafter ``j`` proposes (Max-Gram, bigram) rather than runs passes: its timing
    says so (``seconds_per_token``), or, in a set without timing (a preset), it costs
    nothing."""
    timing = model_set.metadata.get("timing", {}).get(model_set.models[j])
    return "seconds_per_token" in timing if timing is not None else prices.at(j, 1) == 0.0


def simulate_vllm_sd(
    model_set: ModelSet,
    drafter: str,
    k: int,
    batch: int,
    profile: Any = None,
    *,
    steps: int = 20_000,
    block: int = 50,
    seed: int = 0,
    level: float = 0.999,
) -> Estimate:
    """The simulated ``ratio(B, k)`` of :func:`ewif.predict.batch.vllm_ratio` (module
    docstring) and its interval; steps are independent, so ``block`` only batches them.
    ``profile``: a ``csd.vllm-profile/1`` file's tables, read by duck typing (``target_at``,
    ``overhead_at``, ``drafter_first_pass``, ``drafter_pass``, ``ngram``) so that this witness
    imports nothing from ewif it checks."""
    k = validate.count("k", k)
    b = validate.count("batch", batch, minimum=1)
    steps = validate.count("steps", steps, minimum=2)
    block = validate.count("block", block, minimum=1)
    j = model_set.index(drafter)
    rng = np.random.default_rng(validate.count("seed", seed))
    prices = Prices.of(model_set)
    proposer = _proposes(model_set, j, prices)
    pass_price = partial(_price, model_set, prices)
    if proposer and k == 0:
        raise ValueError("an n-gram lookup with k = 0 is autoregressive decoding (ratio 1)")
    if proposer and profile is not None:
        q, alphas = profile.ngram.match_rate, np.array(profile.ngram.alpha_by_position)
        alphas = np.concatenate([alphas, np.full(max(k - alphas.size, 0), alphas[-1])])[:k]
        ar = profile.target_at(b, b) + profile.overhead_at("ar", b, 0)
    else:
        q, alphas = 1.0, np.full(k, float(model_set.alpha[1.0][0, j]))
        ar = pass_price(0, b, 1) if profile is None else None
        if profile is not None:
            ar = profile.target_at(b, b) + profile.overhead_at("ar", b, 0)
    by_rows = [_vllm_step_cost(pass_price, j, b, k, n, proposer, profile) for n in range(b + 1)]
    tokens, cost = np.zeros(steps), np.zeros(steps)
    for s in range(steps):
        matched = rng.random(b) < q
        ok = rng.random((b, k)) < alphas
        accepted = np.where(ok.all(axis=1), k, np.argmin(ok, axis=1)) if k else np.zeros(b)
        tokens[s] = (1 + np.where(matched, accepted, 0)).mean()
        cost[s] = by_rows[int(matched.sum())]  # the step's price by the rows that drafted
    n = steps // block
    x = tokens[: n * block].reshape(n, block).sum(axis=1) * ar
    y = cost[: n * block].reshape(n, block).sum(axis=1)
    return ratio_estimate(x.sum(), y.sum(), x @ x, y @ y, x @ y, n, level)


def _vllm_step_cost(pass_price, j, b, k, rows_drafting, proposer, profile) -> float:
    """One step as vLLM runs it, from the shapes (module docstring)."""
    later = max(k - 1, 0)
    if profile is None:
        if proposer:
            return pass_price(0, b, k + 1) + k * b * pass_price(j, 1, 1)
        return pass_price(0, b, k + 1) + pass_price(j, b, k + 2) + later * pass_price(j, b, 1)
    if proposer:
        return profile.target_at(b, b + k * rows_drafting) + profile.overhead_at("ngram", b, k)
    return (
        profile.target_at(b, b * (k + 1))
        + profile.drafter_first_pass[b][k + 2]
        + later * profile.drafter_pass[b]
        + profile.overhead_at("draft_model", b, k)
    )
