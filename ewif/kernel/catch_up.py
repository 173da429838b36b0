"""The catch-up pass: what a KV-cached drafter really feeds, exactly (Theorem CU).

Algorithm 1 as the paper counts it (:mod:`ewif.kernel.cascade`) prices a generating pass at
``m = 1`` and a review pass at ``m = D + 1``. A model that keeps a KV cache must instead feed
*every token of the sequence it has not fed yet*: its own last generated token (never an
input), the reviewer's correction or bonus token, and the tokens other models appended. Per
model ``i`` with ``catch_up`` set, this module gives the exact law of the positions ``m`` of
its passes (every engine with a KV cache pays it: transformers, llama.cpp, vLLM, …).

**Unfed tail.** Let ``U`` be the number of tokens at the end of the current sequence that
``i`` has not fed. A pass of ``i`` feeds ``m = U + q`` positions, where ``q`` is the draft
built since the context of the call it belongs to (``q = 0`` for a leaf's block at the call
start, ``q = D`` for a review pass; the plain accounting sets ``U = 1``).

**One review call of x, per involved model i** (``i = x`` or a drafter x's call reaches) is
summarised by :class:`Feed`: ``first[q]`` — the law of ``q`` for ``i``'s first pass in the
call (it feeds ``U_in + q``, ``U_in`` the unfed tail at the call's start); ``rest[m]`` —
expected other passes of ``i`` with ``m`` positions (they do not depend on ``U_in``: after its
first pass, ``i`` has fed the whole context); ``exit[t, u]`` — joint law of the tokens ``t``
the call yields and of ``i``'s unfed tail ``u`` after it. The recursion over the blocks of
``x``'s draft (notation of :mod:`ewif.kernel.review_call`):

* ``i = x``: ``first`` = law of the draft length ``D``, no other pass, ``exit[t, 1] = R_x(t)``
  (only x's own correction is unfed).
* A leaf block of ``i`` with budget ``b``: its first pass feeds the tail so far, then ``b − 1``
  passes with ``m = 1``; afterwards the leaf's last token is unfed (``u = 1``).
* A nested block of calls of ``j`` (``i`` involved in every call of ``j``): with the
  sub-call's ``J[t, u]``, tokens law ``R = Σ_u J[·, u]`` and renewal sequence ``u_R``
  (``fill="tokens"``), the calls after the first enter with the previous call's exit tail:
  ``w[u] = Σ_{s<b} u_R(s) Σ_{t<b−s} J[t, u]`` expected re-entries at tail ``u`` (``rounds``:
  ``(b − 1)·Σ_t J[t, u]``), each adding a pass of ``u + q``; every call adds its ``rest``
  (Wald: ``E[N] = 1 + Σ_u w[u]`` calls). The block's length and final tail have the joint
  law ``P(L = v, U = u) = Σ_{s<b} u_R(s) J[v − s, u]`` (``v >= b``).
* A block not involving ``i`` lengthens its unfed tail by the block length.
* The exit: ``i`` has fed the draft up to ``F`` (the end of its last block minus that block's
  tail); x accepts ``a`` tokens, so ``u = 1 + (a − F)^+`` — one plus the accepted tokens of
  the unfed tail, counted with x's acceptance of the tail's producers.

**A target step** (Theorem CU). Every drafter the target's K reaches is called in every step,
so ``U`` at the start of step ``s + 1`` is the exit tail of step ``s``, which depends on step
``s``'s acceptances only: the chain over unfed tails is rank one, its stationary law is
``π(u) = Σ_t exit[t, u]`` reached after one step, and by renewal–reward the expected passes
of ``i`` per step with ``m`` positions are ``(π ⊛ first)[m] + rest[m]``. Tokens do not
change; the pass count does not change; only ``m`` grows (never shrinks), so with costs
non-decreasing in ``m`` the EWIF with catch-up is at most the plain one (with a row cost
``h``, :mod:`ewif.kernel.pass_cost`, when ``c(m) − h·m`` is non-decreasing). ``k = 1`` SD: the
drafter's cost per step is ``α·c₁(2) + (1 − α)·c₁(1)``.

**Theorem CU, row step.** Price a pass of ``m`` positions returning ``r`` rows at ``c_i(m) −
(ρ_i(m) − ρ_i(r))``, ``ρ_i(1) = 0``, ``ρ_i(r) = s_i + h_i·(r − 1)`` (:mod:`ewif.kernel.pass_cost`,
"Row step"). Every pass returns its paper rows ``r`` and feeds ``m >= r`` (the same passes as
the paper's), so its saving is ``h_i·(m − r)`` plus ``s_i`` exactly when ``r = 1 < m``. A
pass that feeds ``m = 1`` has ``r = 1``, so the one-row passes that feed ``m >= 2`` number
``O_i − F_i`` per step: ``O_i`` the paper's passes at ``m = 1`` (generating passes, a tree
drafter's root pass) and ``F_i = (π ⊛ first)[1] + rest[1]`` the fed ones at ``m = 1``. The
expected cost of model ``i`` per target step is therefore

    Σ_m ((π ⊛ first)[m] + rest[m])·c_i(m) − h_i·(catch-up positions) − s_i·(O_i − F_i).

Only ``r = 1`` passes carry the step: a review pass has ``r = D + 1 >= 2`` and a tree level's
pass returns all its rows, so for them ``ρ_i(m) − ρ_i(r) = h_i·(m − r)``. In plain SD with
the leaf drafter first in the target's block (``first = δ_0``, ``rest`` at ``m = 1``) the
count is ``P(U >= 2)``; in general it also counts re-entries of nested calls and leaf passes
after other blocks (``q >= 1``), which feed ``m >= 2`` with one row.

Exactness rests on one assumption, true for greedy verification and for speculative sampling
without lenience: a correction never equals the token it replaces, so a model's fed prefix
never matches the new sequence beyond the first rejected position. With lenience < 1 the
residual can re-draw the rejected token; the law is then an upper bound on ``m``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ewif.base.arithmetic import padded_add, pmf_power
from ewif.kernel.budgets import Rows, drafters_reached, is_leaf
from ewif.kernel.review_call import Call, block_length, renewal, review_call

__all__ = ["Feed", "accepted_law", "feed", "stationary_tail", "step_pass_sizes"]


@dataclass(frozen=True)
class Feed:
    """How model ``i`` feeds its cache during one review call (see the module docstring).

    ``first[q]``: law of the offset ``q`` of ``i``'s first pass (it feeds ``U_in + q``);
    ``rest[m]``: expected other passes of ``i`` with ``m`` positions; ``exit[t, u]``: joint law
    of the call's tokens ``t`` and ``i``'s unfed tail ``u`` after it.
    """

    first: np.ndarray
    rest: np.ndarray
    exit: np.ndarray


def _nested_block(sub: Feed, b: int, fill: str) -> tuple[np.ndarray, np.ndarray, float]:
    """``(joint, reentries, calls)`` of a block of budget ``b`` filled by calls with ``sub``:
    ``joint[v, u] = P(L = v, U = u)``, ``reentries[u]`` = expected calls after the first
    entering with tail ``u``, ``calls = E[N]``."""
    J = sub.exit
    tokens = J.sum(axis=1)
    if fill == "rounds":
        before = pmf_power(tokens, b - 1)
        joint = np.zeros((before.size + J.shape[0] - 1, J.shape[1]))
        for s, p in enumerate(before):
            joint[s : s + J.shape[0]] += p * J
        return joint, (b - 1) * J.sum(axis=0), float(b)
    u = renewal(tokens, b)
    joint = np.zeros((b + J.shape[0] - 1, J.shape[1]))
    reentries = np.zeros(J.shape[1])
    for s in range(b):
        joint[s : s + J.shape[0]] += u[s] * J
        reentries += u[s] * J[: max(b - s, 0)].sum(axis=0)
    joint[:b] = 0.0
    return joint, reentries, float(u.sum())


def _tail_accepted(a: float, w: float, lead: int, later_accepted: np.ndarray) -> np.ndarray:
    """Law of the accepted count ``c`` of an unfed tail: ``lead`` tokens accepted w.p. ``a``
    each (a stop there weighs ``w``), then the later blocks (their accepted-count law
    ``later_accepted``)."""
    out = np.zeros(lead + later_accepted.size)
    out[:lead] = w * a ** np.arange(lead)
    out[lead:] += a**lead * later_accepted
    return out


def accepted_law(blocks: list[tuple[float, float, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(stopped, alive)`` of a sequential review of independent blocks ``(a, w, length
    pmf)``: ``stopped[c]`` = P(the review stops, with weight ``w`` at the stopping position,
    after ``c`` accepted tokens), ``alive[p]`` = P(all ``p`` tokens of the blocks accepted)."""
    stopped = np.zeros(1)
    alive = np.ones(1)
    for a, w, length in blocks:
        powers = a ** np.arange(length.size, dtype=float)
        if length.size > 1:
            survival = np.maximum(1.0 - np.cumsum(length[:-1]), 0.0)  # P(L > i)
            stopped = padded_add(stopped, np.convolve(alive, w * powers[:-1] * survival))
        alive = np.convolve(alive, length * powers)
    return stopped, alive


def _exit_part(
    prefix: list[tuple[float, float, np.ndarray]],
    last: tuple[float, float],
    joint: np.ndarray,
    later: list[tuple[float, float, np.ndarray]],
    terminal: bool,
) -> np.ndarray:
    """``exit[t, u]`` over the stops weighted by each block's ``w`` (and, when ``terminal``,
    the whole draft accepted), from the blocks before ``i``'s last block, that block's
    ``(a, w)`` and ``(L, U)`` joint, and the blocks after it."""
    a, w = last
    stopped, alive = accepted_law(prefix)
    later_stopped, later_alive = accepted_law(later)
    # law of the accepted count of the later blocks, over the outcomes this part counts
    later_accepted = padded_add(later_stopped, later_alive) if terminal else later_stopped
    width = joint.shape[0] + later_accepted.size
    within = np.zeros((width, joint.shape[1] + later_accepted.size + 1))  # [accepted, u]
    for v, lead in zip(*np.nonzero(joint), strict=True):
        p, fed = joint[v, lead], v - lead
        within[:fed, 1] += p * w * a ** np.arange(fed)
        tail = _tail_accepted(a, w, int(lead), later_accepted)
        c = np.arange(tail.size)
        within[fed + c, 1 + c] += p * a**fed * tail
    out = np.zeros((1 + max(stopped.size, alive.size + width), within.shape[1]))
    out[1 : 1 + stopped.size, 1] += stopped
    for q, p in enumerate(alive):
        if p:
            out[1 + q : 1 + q + width] += p * within
    return out


def _exit(
    prefix: list[tuple[float, float, np.ndarray]],
    last: tuple[float, float],
    joint: np.ndarray,
    later: list[tuple[float, float, np.ndarray]],
) -> np.ndarray:
    """``exit[t, u]`` from the blocks ``(a, σ, length)`` before ``i``'s last block, that
    block's ``(a, σ)`` and ``(L, U)`` joint, and the blocks after it. ``σ`` is the chance that
    the reviewer takes a sibling at a position of the block (Theorem TB,
    :mod:`ewif.kernel.siblings`; 0 for a chain): a plain stop weighs ``1 − a − σ``; a sibling
    stop yields one token more and leaves one more unfed (``t + 1``, ``u + 1``)."""

    def weighted(blocks, stop):
        return [(x, stop(x, s), length) for x, s, length in blocks]

    a, s = last
    plain = _exit_part(
        weighted(prefix, _plain), (a, _plain(a, s)), joint, weighted(later, _plain), True
    )
    if s == 0.0 and not any(x[1] for x in (*prefix, *later)):
        return plain
    sib = _exit_part(weighted(prefix, _sib), (a, s), joint, weighted(later, _sib), False)
    out = np.zeros((max(plain.shape[0], sib.shape[0] + 1), max(plain.shape[1], sib.shape[1] + 1)))
    out[: plain.shape[0], : plain.shape[1]] += plain
    out[1 : 1 + sib.shape[0], 1 : 1 + sib.shape[1]] += sib
    return out


def _plain(a: float, s: float) -> float:
    return max(1.0 - a - s, 0.0)


def _sib(a: float, s: float) -> float:
    return s


def feed(
    i: int,
    r: int,
    rows: Rows,
    alpha: np.ndarray,
    fill: str,
    calls: dict[tuple[int, Rows], Call],
    memo: dict[tuple, Feed],
    sigma: tuple[float, ...] | None = None,
) -> Feed:
    """The exact :class:`Feed` of model ``i`` in a review call of ``r`` (``i = r`` or a drafter
    the call reaches). ``calls`` memoises the kernel's calls priced at zero (the feeds need
    only their token and draft laws; keep it apart from a costed memo), ``memo`` the feeds.
    ``sigma`` (one entry per model, or None): the chance that ``r`` takes a sibling at a
    position of drafter ``j``'s block, for a review with siblings (Theorem TB,
    :mod:`ewif.kernel.siblings`); the calls nested below are chains."""
    key = (i, r, rows) if sigma is None else (i, r, rows, sigma)
    if key in memo:
        return memo[key]
    if i == r:
        call = _call(r, rows, alpha, fill, calls)
        out = np.zeros((call.pmf.size, 2))
        out[:, 1] = call.pmf
        result = Feed(call.draft.copy(), np.zeros(1), out)
        memo[key] = result
        return result
    n = r + len(rows)
    offset, since, first, rest = np.ones(1), None, None, np.zeros(1)
    blocks: list[tuple[float, float, np.ndarray]] = []
    last: tuple[int, np.ndarray] | None = None  # (block index, (L, U) joint) of i's last block
    for j, b in zip(range(r + 1, n + 1), rows[0], strict=True):
        if b == 0:
            continue
        leaf = is_leaf(rows, j - r)
        involved = i == j or (not leaf and i in drafters_reached(j, rows[j - r :]))
        if not involved:
            if leaf:
                length = np.zeros(b + 1)
                length[b] = 1.0
            else:
                length, _ = block_length(_call(j, rows[j - r :], alpha, fill, calls).pmf, b, fill)
            if since is not None:
                since = np.convolve(since, length)
        else:
            if leaf:
                joint = np.zeros((b + 1, 2))
                joint[b, 1] = 1.0
                sub_first, reentries, more = np.ones(1), np.zeros(1), np.array([0.0, b - 1.0])
            else:
                sub = feed(i, j, rows[j - r :], alpha, fill, calls, memo)
                joint, reentries, n_calls = _nested_block(sub, b, fill)
                sub_first = sub.first
                more = padded_add(np.convolve(reentries, sub.first), n_calls * sub.rest)
            if since is None:
                first = np.convolve(offset, sub_first)
            else:
                rest = padded_add(rest, np.convolve(since, sub_first))
            rest = padded_add(rest, more)
            since = joint.sum(axis=0)
            length = joint.sum(axis=1)
            last = (len(blocks), joint)
        offset = np.convolve(offset, length)
        blocks.append((float(alpha[r, j]), 0.0 if sigma is None else sigma[j], length))
    if last is None or first is None:
        raise ValueError(f"model {i} makes no pass in a review call of model {r}")
    at, joint = last
    exit_law = _exit(blocks[:at], blocks[at][:2], joint, blocks[at + 1 :])
    result = Feed(first, rest, exit_law)
    memo[key] = result
    return result


def _call(r: int, rows: Rows, alpha: np.ndarray, fill: str, calls: dict) -> Call:
    """The kernel's call of ``r`` (its tokens and draft laws; costs priced at zero)."""
    return review_call(r, rows, alpha, _ZERO_COST, fill, calls)


class _ZeroCost:
    """A pass-cost stand-in pricing every pass at 0: the feeds need the kernel's token laws
    only, so they never depend on (or recompute for) the cost curves."""

    unit = 1.0

    @staticmethod
    def at(i: int, m: int | np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(m))

    @staticmethod
    def expected(i: int, m_pmf: np.ndarray) -> float:
        return 0.0


_ZERO_COST = _ZeroCost()


def stationary_tail(step: Feed) -> np.ndarray:
    """``π(u)``: the stationary law of a model's unfed tail at the start of a target step —
    the marginal of the target call's exit (the chain is rank one, Theorem CU)."""
    return step.exit.sum(axis=0)


def step_pass_sizes(step: Feed) -> np.ndarray:
    """Expected passes per target step by positions ``m``: ``(π ⊛ first)[m] + rest[m]``."""
    return padded_add(np.convolve(stationary_tail(step), step.first), step.rest)
