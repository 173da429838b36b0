"""One review call of Algorithm 1, exactly: the single kernel behind ``Cascade`` and ``optimize``.

Semantics are those of :mod:`ewif.kernel.cascade` (the contract). A review call of model ``r``
builds its draft block by block, ``j = r+1..n``; block ``j`` has budget ``b = k_(r+1)j``
(0 skips it). A *leaf* (:func:`ewif.kernel.budgets.is_leaf`) writes its block with ``b`` generating
passes (``m = 1`` each, cost ``c_j(1)`` each). Otherwise the block is filled by review calls of
``j`` with tokens pmf ``R_j``:

* ``fill="tokens"``: the stopped sum ``L = S_N``, ``N = min{n : S_n >= b}``. With the
  renewal sequence ``u(0) = 1``, ``u(s) = Σ_t P(R_j = t) u(s − t)``:
  ``P(L = v) = Σ_{s<b} u(s) P(R_j = v − s)`` for ``v >= b`` and ``E[N] = Σ_{s<b} u(s)``;
* ``fill="rounds"``: ``L = R_j^{*b}`` (``b``-fold convolution), ``N = b``.

Blocks are independent, so the draft length ``D = Σ_j L_j`` has the convolution of their
pmfs, and the review pass of ``r`` processes ``m = D + 1`` positions: its expected cost is
``E[c_r(D + 1)]`` from that exact pmf. A nested block costs ``E[N]`` times the expected
cost of one call of ``j`` (Wald's identity: ``N`` is a stopping time of the i.i.d.
sequence of (tokens, cost) pairs); the same holds for pass counts by ``m``. The tokens
pmf of the call: with ``a = alpha[r, j]`` and ``S`` the (sub-)pmf of the accepted count
on the event that everything so far was accepted, each block adds ``S·F_j`` to the
stopped mass, ``F_j(x) = (1−a) Σ_i a^i P(L > i) x^i``, and updates ``S ← S·L_j(a x)``;
finally ``R_r(x) = x·(Σ stopped + S)``. All finite polynomial arithmetic: exact up to
rounding.

Rows (:data:`ewif.kernel.budgets.Rows`): the K rows of models ``r..n−1`` as a tuple ``rows`` with
``rows[i]`` the budgets of model ``r + i`` for drafters ``r+i+1..n`` (``K[r+i, r+i:]`` of the
``n×n`` K), so one call depends on nothing else and memoises under the key ``(r, rows)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ewif.base.arithmetic import padded_add, pmf_power
from ewif.kernel.budgets import Rows, is_leaf
from ewif.kernel.pass_cost import PassCost


def renewal(pmf: np.ndarray, size: int) -> np.ndarray:
    """``u(s) = P(some partial sum of i.i.d. R equals s)``, ``s < size`` (``pmf[0] = 0``)."""
    u = np.zeros(max(size, 1))
    u[0] = 1.0
    r = pmf[1:size]  # r[t-1] = P(R = t), t < size
    for s in range(1, size):
        m = min(s, r.size)
        u[s] = r[:m] @ u[s - 1 :: -1][:m]
    return u


def stopped_sum(pmf: np.ndarray, budget: int) -> tuple[np.ndarray, float]:
    """Overshoot distribution and expected count of i.i.d. draws until the sum reaches ``budget``.

    ``pmf[t] = P(R = t)`` with ``pmf[0] = 0``. Returns ``(l, E[N])`` with ``l[v] = P(S_N = v)``,
    ``N = min{n : S_n >= budget}``; ``budget = 0`` gives ``l = [1]`` and ``E[N] = 0``.
    """
    if budget == 0:
        return np.ones(1), 0.0
    u = renewal(pmf, budget)
    out = np.convolve(u, pmf)
    out[:budget] = 0.0
    return out, float(u.sum())


def block_length(pmf: np.ndarray, budget: int, fill: str) -> tuple[np.ndarray, float]:
    """Length pmf of a nested block of ``budget`` filled by calls with tokens ``pmf``, and
    the expected number of calls."""
    if fill == "tokens":
        return stopped_sum(pmf, budget)
    return pmf_power(pmf, budget), float(budget)


def block_lengths(pmf: np.ndarray, budgets: np.ndarray, fill: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`block_length` for many budgets at once: ``(lengths, calls)`` with
    ``lengths[i, v] = P(L_{budgets[i]} = v)`` (rows zero-padded to one width).

    ``tokens``: ``P(L_b = v) = Σ_{s<b} u(s) P(R = v − s)`` for ``v >= b`` — one cumulative
    sum over ``s`` of the matrix ``u(s) P(R = v − s)`` gives every ``b``.
    """
    budgets = np.asarray(budgets, dtype=np.int64)
    bmax = int(budgets.max())
    width = bmax + pmf.size - 1 if fill == "tokens" else bmax * (pmf.size - 1) + 1
    out = np.zeros((budgets.size, max(width, 1)))
    if fill == "rounds":
        power = np.ones(1)
        powers = [power]
        for _ in range(bmax):
            power = np.convolve(power, pmf)
            powers.append(power)
        for i, b in enumerate(budgets):
            out[i, : powers[b].size] = powers[b]
        return out, budgets.astype(float)
    u = renewal(pmf, bmax)
    joint = np.zeros((u.size, out.shape[1]))  # joint[s, v] = u(s) P(R = v − s)
    for s in range(bmax):
        joint[s, s : s + pmf.size] = u[s] * pmf
    below = np.concatenate([np.zeros((1, joint.shape[1])), np.cumsum(joint, axis=0)])
    out[:] = below[budgets]  # Σ_{s<b}
    out[np.arange(out.shape[1])[None, :] < budgets[:, None]] = 0.0  # v >= b only
    out[budgets == 0, 0] = 1.0
    return out, np.concatenate([[0.0], np.cumsum(u)])[budgets]


def review_outcome(blocks: list[tuple[float, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Tokens pmf of one review over independent blocks ``(accept, length_pmf)``, in order.

    Returns ``(tokens_pmf, all_accepted)``: ``tokens_pmf[t] = P(accepted + 1 = t)`` and
    ``all_accepted[d] = P(draft length = d and every draft token accepted)``.
    """
    stopped = np.zeros(1)
    s = np.ones(1)
    for a, length in blocks:
        powers = a ** np.arange(length.size, dtype=float)
        if length.size > 1:
            survival = 1.0 - np.cumsum(length[:-1])  # P(L > i), i = 0..max-1
            fail = (1.0 - a) * powers[:-1] * np.maximum(survival, 0.0)
            stopped = padded_add(stopped, np.convolve(s, fail))
        s = np.convolve(s, length * powers)
    tokens = np.concatenate([[0.0], padded_add(stopped, s)])
    return tokens, s


@dataclass(frozen=True)
class Call:
    """One review call of a model, exactly.

    ``sizes[i][m]`` is the expected number of passes of model ``i`` that process ``m``
    positions, per call (so ``passes[i] = sizes[i].sum()`` and ``cost[i] =
    Σ_m sizes[i][m]·c_i(m)``).
    """

    pmf: np.ndarray  # pmf[t] = P(call yields t tokens); pmf[0] = 0
    cost: np.ndarray  # (n+1,) expected cost per call, split by model
    passes: np.ndarray  # (n+1,) expected forward passes per call, by model
    all_accepted: np.ndarray  # all_accepted[d] = P(draft length d and all d accepted)
    draft: np.ndarray  # draft[d] = P(draft length D = d)
    sizes: tuple[np.ndarray, ...]  # sizes[i][m] = expected passes of i with m positions

    @property
    def total_cost(self) -> float:
        """Expected cost of the call, all models together."""
        return float(self.cost.sum())


def review_call(
    r: int,
    rows: Rows,
    alpha: np.ndarray,
    pass_cost: PassCost,
    fill: str,
    memo: dict[tuple[int, Rows], Call],
) -> Call:
    """The exact review call of model ``r`` given the K ``rows`` of models ``r..n−1``.

    ``alpha`` and ``pass_cost`` are indexed by model ``0..n`` (``n = r + len(rows)``);
    ``memo`` caches calls under ``(r, rows)`` (share it between calls with the same alpha,
    costs and fill). See the module docstring for the method.
    """
    key = (r, rows)
    call = memo.get(key)
    if call is not None:
        return call
    n = r + len(rows)
    cost = np.zeros(n + 1)
    passes = np.zeros(n + 1)
    sizes = [np.zeros(1) for _ in range(n + 1)]
    blocks = []
    draft = np.ones(1)
    for j, b in zip(range(r + 1, n + 1), rows[0], strict=True):
        if b == 0:
            continue
        if is_leaf(rows, j - r):  # b generating passes, m = 1 each
            length = np.zeros(b + 1)
            length[b] = 1.0
            passes[j] += b
            cost[j] += b * float(pass_cost.at(j, 1))
            sizes[j] = padded_add(sizes[j], np.array([0.0, float(b)]))
        else:
            sub = review_call(j, rows[j - r :], alpha, pass_cost, fill, memo)
            length, calls = block_length(sub.pmf, b, fill)
            passes += calls * sub.passes
            cost += calls * sub.cost
            for i in range(j, n + 1):
                sizes[i] = padded_add(sizes[i], calls * sub.sizes[i])
        draft = np.convolve(draft, length)
        blocks.append((float(alpha[r, j]), length))
    pmf, all_accepted = review_outcome(blocks)
    m_pmf = np.concatenate([[0.0], draft])  # the review pass processes m = D + 1 positions
    passes[r] += 1.0
    cost[r] += pass_cost.expected(r, m_pmf)
    sizes[r] = padded_add(sizes[r], m_pmf)
    call = Call(pmf, cost, passes, all_accepted, draft, tuple(sizes))
    memo[key] = call
    return call
