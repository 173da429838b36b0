"""CS Drafting + siblings: the target reviews Algorithm 1's draft as the main path of a tree,
with siblings at each position (Theorem TB).

**The tree.** A target step builds its draft exactly as Algorithm 1 does
(:mod:`ewif.kernel.cascade`: blocks ``j = 1..n`` of the target's K row, nested review calls
unchanged). At every position of
drafter ``j``'s block the target also verifies ``s_j`` *siblings*: the runner-up candidates
(ranks ``2..s_j + 1``) of the model that drafted that position — its logits already exist, so a
sibling costs verification only — or Max-Gram's other matches. Siblings are leaves. The
target's pass feeds the root, the ``D`` draft tokens and their siblings:
``m = 1 + Σ_j (1 + s_j)·L_j`` positions, one logit row each.

**Theorem TB.** With ``p^(0j)`` the rank-acceptance vector of the pair (target, ``j``)
(:mod:`ewif.kernel.tree`; ``p_1 = α_0j``) and ``σ_j = Σ_{b=2}^{s_j+1} p_b``, at a position of
block ``j`` the target's token is the main draft token with probability ``a = α_0j``, one of
the siblings with probability ``σ_j``, neither otherwise. A main token accepted continues the
walk; a sibling ends it with the sibling and the target's bonus after it; neither ends it with
the correction. So with ``c`` main tokens accepted, the step yields ``c + 1`` tokens after a
plain stop or the whole draft accepted, and ``c + 2`` after a sibling stop:

    P(T = t) = P_plain(c = t − 1) + P_sib(c = t − 2),

where both are :func:`ewif.kernel.catch_up.accepted_law` of the blocks — the stop at a position
weighing ``1 − a − σ_j`` (plain, plus the whole draft accepted) or ``σ_j`` (sibling). ``E[T] =
1 + E_1 + P_1(E_2 + P_2(E_3 + …))`` with ``P_j = E[a^L_j]`` and ``E_j = (a + σ_j)·E[Σ_{i<L_j}
a^i]``. The drafters' passes are Algorithm 1's (Wald over the nested calls); a KV-cached
drafter's unfed tail after a sibling stop holds one token more (the sibling and the bonus,
instead of the correction): Theorem CU's exit with ``(t, u) → (t + 1, u + 1)`` on sibling
stops (:func:`ewif.kernel.catch_up.feed` with ``sigma``). With ``s = 0`` this is Algorithm 1.

**Siblings a proposer does not find** (Theorem TP, :mod:`ewif.kernel.tree`). A proposer's
runner-ups are its other matches, which may run out: with ``q_b`` = P(at least ``b``
candidates), independent across positions, a position of its block carries ``S`` siblings with
``P(S >= i) = q_(i+1) / q_1`` (``i <= s_j``; the main token is there), so the block's positions
are the compound sum ``Σ_(t <= L_j) (1 + S_t)`` instead of ``(1 + s_j)·L_j``. The tokens are
unchanged: ``σ_j`` already counts a missing sibling as not taken.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ewif.base.arithmetic import padded_add
from ewif.kernel.budgets import Rows, is_leaf
from ewif.kernel.catch_up import accepted_law
from ewif.kernel.pass_cost import PassCost
from ewif.kernel.review_call import Call, block_length, review_call

__all__ = ["block_positions", "sibling_call", "sibling_outcome"]


def sibling_outcome(blocks: list[tuple[float, float, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens_pmf, all_accepted)`` of a target review of blocks ``(a, σ, length pmf)`` with
    siblings (Theorem TB): ``tokens_pmf[t] = P(T = t)``, ``all_accepted[d]`` = P(draft length
    ``d`` and every main token accepted)."""
    plain, alive = accepted_law([(a, max(1.0 - a - s, 0.0), length) for a, s, length in blocks])
    sib, _ = accepted_law([(a, s, length) for a, s, length in blocks])
    tokens = np.concatenate([[0.0], padded_add(plain, alive)])
    return padded_add(tokens, np.concatenate([[0.0, 0.0], sib])), alive


def sibling_call(
    rows: Rows,
    alpha: np.ndarray,
    sigma: tuple[float, ...],
    siblings: tuple[int, ...],
    pass_cost: PassCost,
    fill: str,
    memo: dict,
    presence: Mapping[int, np.ndarray] | None = None,
) -> Call:
    """The target's review call with ``siblings[j]`` siblings at each position of drafter
    ``j``'s block, taken with probability ``sigma[j]`` (Theorem TB); ``rows`` the K rows of
    models ``0..n−1``, ``memo`` the kernel's memo of nested calls (shared with
    :func:`ewif.kernel.review_call.review_call`); ``presence[j]`` a proposer's candidate
    presence (module docstring; a drafter not in it has all its siblings)."""
    chain = review_call(0, rows, alpha, pass_cost, fill, memo)
    n = len(rows)
    blocks = []
    positions = np.ones(1)  # law of the target's positions beyond the root
    for j, b in zip(range(1, n + 1), rows[0], strict=True):
        if b == 0:
            continue
        if is_leaf(rows, j):
            length = np.zeros(b + 1)
            length[b] = 1.0
        else:
            sub = review_call(j, rows[j:], alpha, pass_cost, fill, memo)
            length, _ = block_length(sub.pmf, b, fill)
        blocks.append((float(alpha[0, j]), float(sigma[j]), length))
        block = block_positions(length, siblings[j], (presence or {}).get(j))
        positions = np.convolve(positions, block)
    pmf, all_accepted = sibling_outcome(blocks)
    m_pmf = np.concatenate([[0.0], positions])
    cost = chain.cost.copy()
    cost[0] = pass_cost.expected(0, m_pmf)
    sizes = (m_pmf, *chain.sizes[1:])
    return Call(pmf, cost, chain.passes.copy(), all_accepted, positions, sizes)


def block_positions(length: np.ndarray, s: int, presence: np.ndarray | None) -> np.ndarray:
    """The pmf of the positions a block of ``L`` draft tokens (pmf ``length``) puts in the
    target's pass with ``s`` siblings per token: ``(1 + s)·L``, or with a proposer's
    ``presence`` the compound sum ``Σ_(t <= L) (1 + S_t)`` (module docstring)."""
    if presence is None or s == 0:
        out = np.zeros((1 + s) * (length.size - 1) + 1)
        out[:: 1 + s] = length
        return out
    return _compound(length, _with_siblings(s, presence))


def _with_siblings(s: int, presence: np.ndarray) -> np.ndarray:
    """The pmf of ``1 + S``, the positions of one draft token and the siblings found,
    ``P(S >= i) = q_(i+1) / q_1`` (module docstring)."""
    if presence.size < s + 1:
        raise ValueError(f"presence gives q_1..q_{presence.size}, but {s} siblings need q_{s + 1}")
    out = np.zeros(s + 2)
    at_least = np.concatenate([[1.0], presence[1 : s + 1] / presence[0], [0.0]])
    out[1:] = at_least[:-1] - at_least[1:]
    return out


def _compound(length: np.ndarray, per_position: np.ndarray) -> np.ndarray:
    """The pmf of ``Σ_(t <= L) X_t``, ``L`` with pmf ``length``, the ``X_t`` independent with
    pmf ``per_position``."""
    out, power = np.zeros(1), np.ones(1)
    for p in length:
        out = padded_add(out, p * power)
        power = np.convolve(power, per_position)
    return out
