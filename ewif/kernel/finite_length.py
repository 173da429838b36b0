"""EWIF of a generation of ``N`` tokens, exactly (Theorem FL).

The renewal–reward EWIF of :mod:`ewif.kernel.cascade` is the speed-up of an endless generation.
A real request stops at ``max_new_tokens`` (or at EOS): the decoder cuts the tokens of its
last target step to what is still missing, but that step has already paid for its whole
draft and review. With ``N`` tokens to make and ``μ`` tokens per step, the overshoot of the
last step is a fixed cost per generation, so the speed-up of short generations is usually
below the endless one (a few per cent at ``N = 32`` with ``μ ≈ 3.5``) and tends to it as
``N`` grows. It is not a bound: the first step starts from the prefilled prompt, where a
catch-up drafter feeds fewer positions than in a stationary step, and an ``N`` the steps fill
exactly overshoots nothing (SD ``k = 1`` at ``α = 1``: ``EWIF_2 = 2/(c_0(2) + c_1(1))``, above
the endless ``2/(c_0(2) + c_1(2))``). The autoregressive reference makes ``N`` passes of
cost ``c_0(1)`` each, so

    EWIF_N = N·c_0(1) / E[C(N)],     E[C(N)] = Σ_i E[C_i(N)]   (model i's passes),

and for a workload of generations of lengths ``N_1..N_P``, ``Σ N_p·c_0(1) / Σ E[C(N_p)]``.

**Steps.** Target steps yield ``T_1, T_2, …`` tokens, i.i.d. with the law ``p`` of
:meth:`~ewif.kernel.cascade.Cascade.tokens_pgf` (``T ≥ 1``). Step ``s + 1`` is made iff
``T_1 + … + T_s < N``. With the renewal mass ``U(0) = 1``, ``U(n) = Σ_{t=1}^{n} p(t)·U(n − t)``
(the expected number of partial sums equal to ``n``), the expected number of steps is

    E[S_N] = Σ_{n<N} U(n).

**Costs** (Wald). A model whose step cost does not depend on earlier steps (the target, a
proposer, a drafter without catch-up) pays ``E[C_i(N)] = E[S_N]·E[C_i]``: whether step ``s``
happens depends on steps before it only. A drafter with catch-up (Theorem CU,
:mod:`ewif.kernel.catch_up`) pays for its first pass in a step by the unfed tail ``u`` the step
enters with: ``ĉ_i(u) = Σ_q first[q]·c_i(u + q) + Σ_m rest[m]·c_i(m)``. The tail a step
leaves has the joint law ``J_i(t, u)`` with the step's tokens, independent of the tail it
entered with (the chain is rank one), so

    E[C_i(N)] = ĉ_i(0) + Σ_{n<N} U(n) Σ_{t < N−n} Σ_u J_i(t, u)·ĉ_i(u).

The first step enters with ``u = 0``: the prompt is prefilled and every model has fed all
of it. A pass must still compute the logits it is asked for (``n = 1`` generating, ``D + 1``
reviewing a draft of ``D``), so the first pass feeds ``max(q, n)`` positions: ``q + 1`` when
it *leads* — no other model's block comes before it in the step, so ``q`` is its own draft
(or 0) and it re-feeds the prompt's last token — and ``q`` otherwise, exactly what the other
models appended (:func:`first_pass_leads`, a property of K).

**Logit rows.** With a row cost ``h_i`` (:mod:`ewif.kernel.pass_cost`) every pass returns the
paper's rows whatever it feeds, so a step entering with ``u`` costs ``ĉ_i(u) − h_i·(P_i(u) −
R_i)``: ``P_i(u)`` is ``ĉ_i(u)`` with the identity curve ``c(m) = m`` (the positions fed) and
``R_i`` the step's logit rows (:meth:`~ewif.kernel.cascade.Cascade.logit_rows`). With a row
step ``s_i`` as well (Theorem CU, row step), less ``s_i·(O_i − F_i(u))``: ``O_i`` the step's
one-row passes (:meth:`~ewif.kernel.cascade.Cascade.one_row_passes`) and ``F_i(u)`` its passes
that feed one position (``ĉ_i(u)`` with ``c(m) = [m = 1]``); a pass that feeds one position
returns one row, so their difference counts the one-row passes that feed ``m >= 2``. At
``u = 0`` a leading pass feeds ``max(q, n) >= n`` (its rows), so the count holds there too.

``N = 1``: one step, ``EWIF_1 = c_0(1)/ĉ(0)``; ``N → ∞``: ``E[C(N)]/N → E[C]/μ`` and
``EWIF_N → EWIF`` (renewal theorem).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ewif.base import limits, validate
from ewif.kernel.budgets import drafters_reached, is_leaf, rows_of
from ewif.kernel.catch_up import Feed
from ewif.kernel.pass_cost import PassCost

#: Longest generation ``generation_cost`` evaluates (the renewal mass is a loop over its
#: tokens: 10^5 take about 0.1 s); beyond it the endless EWIF is the answer to 1/N.
MAX_LENGTH = 100_000

__all__ = [
    "CaughtUp",
    "entry_costs",
    "expected_steps",
    "first_pass_leads",
    "generation_costs",
    "generation_lengths",
    "renewal_mass",
]


def renewal_mass(pmf: np.ndarray, n: int) -> np.ndarray:
    """``U(0..n−1)``: expected number of partial sums of i.i.d. steps with law ``pmf``
    (``pmf[t] = P(T = t)``, ``pmf[0] = 0``) that equal each value below ``n``."""
    p = np.asarray(pmf, dtype=float)[1:]  # p[t − 1] = P(T = t)
    u = np.zeros(n)
    u[0] = 1.0
    for k in range(1, n):
        w = min(k, p.size)
        u[k] = p[:w] @ u[k - 1 :: -1][:w]
    return u


def expected_steps(pmf: np.ndarray, n: int) -> float:
    """``E[S_n] = Σ_{m<n} U(m)``: expected target steps to make ``n`` tokens."""
    return float(renewal_mass(pmf, n).sum())


def first_pass_leads(K: object, i: int) -> bool:
    """Whether drafter ``i``'s first pass in a target step comes before any other model's
    block: at every level of the nesting that leads to it, the first block with a positive
    budget is ``i``'s own or a call that reaches ``i``."""
    rows = rows_of(np.asarray(K, dtype=int))
    r = 0
    while True:
        j = next(j for j, b in enumerate(rows[r], start=r + 1) if b)
        if j == i:
            return True
        if is_leaf(rows, j) or i not in drafters_reached(j, rows[j:]):
            return False
        r = j


class CaughtUp(NamedTuple):
    """A catch-up drafter's part of Theorem FL: ``entry[u] = ĉ_i(u)`` (with its rows priced)
    for every tail ``u`` a step can enter with, and ``exit[t, u] = J_i(t, u)``."""

    entry: np.ndarray
    exit: np.ndarray


def entry_costs(
    K: object,
    i: int,
    step: Feed,
    pass_cost: PassCost,
    logit_rows: float,
    one_row_passes: float = 0.0,
) -> np.ndarray:
    """``ĉ_i(u)`` for every tail ``u`` a step can enter with (index 0: the first step's);
    with a row cost ``h_i``, less ``h_i`` per position beyond the step's ``logit_rows``; with
    a row step ``s_i``, less ``s_i`` per pass of the step's ``one_row_passes`` that feeds
    ``m >= 2`` positions (module docstring)."""
    priced = _entry_sums(K, i, step, lambda m: pass_cost.at(i, m))
    h, s = float(pass_cost.row_cost[i]), float(pass_cost.row_step[i])
    if h:
        positions = _entry_sums(K, i, step, lambda m: np.asarray(m, dtype=float))
        priced = priced - h * (positions - logit_rows)
    if s:
        single = _entry_sums(K, i, step, lambda m: (np.asarray(m) == 1).astype(float))
        priced = priced - s * (one_row_passes - single)
    return priced


def _entry_sums(
    K: object, i: int, step: Feed, price: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """``Σ`` over a step's passes of ``price(m)`` by the tail ``u`` it enters with: the first
    pass feeds ``u + q``; in the first step (``u = 0``) ``q + 1`` if it leads, else ``q``."""
    rest = float(step.rest[1:] @ price(np.arange(1, step.rest.size))) if step.rest.size > 1 else 0.0
    q = np.arange(step.first.size)
    out = np.zeros(max(step.exit.shape[1], 2))
    for u in range(1, out.size):
        out[u] = float(step.first @ price(u + q)) + rest
    out[0] = out[1] if first_pass_leads(K, i) else float(step.first[1:] @ price(q[1:])) + rest
    return out


def generation_costs(
    pmf: np.ndarray, fixed: float, caught: Sequence[CaughtUp], lengths: Sequence[int]
) -> dict[int, float]:
    """``E[C(n)]`` for every ``n`` in ``lengths`` (module docstring): steps yield tokens with
    law ``pmf``; ``fixed`` is the step cost of every model whose cost does not depend on the
    past, ``caught`` one :class:`CaughtUp` per catch-up drafter. One renewal mass serves all
    lengths: ``U`` up to ``n`` is the prefix of ``U`` up to the longest length."""
    wanted = sorted(
        {
            limits.at_most(
                "max_new_tokens",
                validate.count("max_new_tokens", n, minimum=1),
                MAX_LENGTH,
                "tokens (the endless EWIF, max_new_tokens=None, is the limit of long generations)",
            )
            for n in lengths
        }
    )
    mass = renewal_mass(np.asarray(pmf, dtype=float), wanted[-1])
    # kept[t] = Σ_{t' < t} Σ_u J[t', u]·ĉ(u): the next step's expected cost, over exits whose
    # tokens leave the generation unfinished
    kept = [
        (c.entry[0], np.concatenate([[0.0], np.cumsum(c.exit @ c.entry[: c.exit.shape[1]])]))
        for c in caught
    ]
    out = {}
    for n in wanted:
        head = mass[:n]
        total = float(head.sum()) * fixed
        for first, cumulative in kept:
            remaining = np.minimum(n - np.arange(n), cumulative.size - 1)  # tokens t < n − m
            total += first + float(head @ cumulative[remaining])
        out[n] = total
    return out


def generation_lengths(lengths: int | Sequence[int]) -> list[int]:
    """The checked lengths of a workload: one ``int >= 1`` or a non-empty sequence of them."""
    if isinstance(lengths, (int, np.integer)) and not isinstance(lengths, bool):
        return [validate.count("max_new_tokens", lengths, minimum=1)]
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence | np.ndarray):
        raise TypeError(
            "max_new_tokens must be an int >= 1 or a sequence of them (one per generation), "
            f"got {type(lengths).__name__}"
        )
    if len(lengths) == 0:
        raise ValueError("max_new_tokens must name at least one generation length, got []")
    return [validate.count(f"max_new_tokens[{k}]", v, minimum=1) for k, v in enumerate(lengths)]
