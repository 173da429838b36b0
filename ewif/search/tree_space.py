"""The target level of the tree search, vectorised: every target row (budgets and siblings)
of one assignment of the rows below, priced at once (Theorem TB's block summaries).

For a drafter ``j`` of the target's row the options are ``(b, s)``: budget ``b`` (0: no block)
and ``s`` siblings per token. With the block length ``L_b`` (a leaf: ``b``; a nested block: the
stopped sum of ``j``'s review calls, every budget from one renewal sequence,
:func:`ewif.kernel.review_call.block_lengths`), ``a = α_0j`` and ``σ_s = p_2 + … + p_(s+1)``:

* ``P = E[a^L]``, ``E = (a + σ_s)·E[Σ_{i<L} a^i]`` (tokens, Theorem TB: ``E[T] = 1 + E_1 +
  P_1(E_2 + P_2(…))``);
* ``C`` the drafters' cost of the block (Wald: calls × one call's cost; a leaf ``b·c_j(1)``);
* the target's positions: the law of ``(1 + s)·L`` per block, and the review costs
  ``E[c_0(1 + Σ_j (1 + s_j) L_j)]`` by a backward pass over the blocks
  (``G(x) = c_0(1 + x)``, ``G_j[o, …, x] = Σ_v P(X_j(o) = v)·G_(j+1)[…, x + v]``).

Priced with the true costs these are the exact EWIF of every configuration without catch-up;
priced with :func:`ewif.search.catch_up_search.bounding_set`'s costs they bound the catch-up
EWIF from above (every pass of a catch-up drafter feeds at least its paper positions and
returns its paper rows), which the search then evaluates exactly, best first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ewif.kernel.pass_cost import PassCost
from ewif.kernel.review_call import Call, block_lengths
from ewif.kernel.siblings import block_positions

__all__ = ["BlockOptions", "block_options", "empty_block", "target_values"]


class BlockOptions(NamedTuple):
    """One target block's options: ``budget[o]``, ``siblings[o]``, and per option ``P``,
    ``E``, ``C`` and ``positions[o, x]`` = P(the block adds ``x`` target positions)."""

    budget: np.ndarray
    siblings: np.ndarray
    P: np.ndarray
    E: np.ndarray
    C: np.ndarray
    positions: np.ndarray


def empty_block() -> BlockOptions:
    """A drafter with no block in the target's row (budget 0)."""
    one, zero = np.ones(1), np.zeros(1)
    return BlockOptions(np.zeros(1, np.int64), np.zeros(1, np.int64), one, zero, zero, one[None])


def block_options(
    a: float,
    vector: np.ndarray,
    budgets: Sequence[int],
    max_siblings: int,
    call: Call | None,
    leaf_cost: float,
    fill: str,
    presence: np.ndarray | None = None,
) -> BlockOptions:
    """Options ``b ∈ {0} ∪ budgets``, ``s ∈ 0..min(max_siblings, R − 1)`` of a target block
    whose drafter has acceptance ``a``, rank vector ``vector``; ``call`` its review call
    (None: a leaf, ``leaf_cost`` per token); ``presence`` a proposer's candidate presence
    (Theorem TP: the siblings it finds). Budgets must be positive."""
    b = np.asarray(sorted(set(budgets)), dtype=np.int64)
    if call is None:
        lengths = np.zeros((b.size, int(b.max()) + 1))
        lengths[np.arange(b.size), b] = 1.0
        cost = b * leaf_cost
    else:
        lengths, calls = block_lengths(call.pmf, b, fill)
        cost = calls * call.total_cost
    v = np.arange(lengths.shape[1])
    power = lengths @ (a ** v.astype(float))
    below = lengths @ np.concatenate([[0.0], np.cumsum(a ** v[:-1].astype(float))])
    sig = np.concatenate([[0.0], np.cumsum(vector[1:])])[: min(max_siblings, vector.size - 1) + 1]
    S = sig.size
    width = S * (lengths.shape[1] - 1) + 1
    positions = np.zeros((b.size * S, width))
    for i, length in enumerate(lengths):
        for s in range(S):
            law = block_positions(length, s, presence)
            positions[i * S + s, : law.size] = law
    head = empty_block()
    return BlockOptions(
        np.concatenate([head.budget, np.repeat(b, S)]),
        np.concatenate([head.siblings, np.tile(np.arange(S), b.size)]),
        np.concatenate([head.P, np.repeat(power, S)]),
        np.concatenate([head.E, (np.repeat(below, S) * (a + np.tile(sig, b.size)))]),
        np.concatenate([head.C, np.repeat(cost, S)]),
        _stack(head.positions, positions),
    )


def target_values(blocks: Sequence[BlockOptions], pass_cost: PassCost) -> np.ndarray:
    """EWIF (``tokens·c_0(1)/cost``) of every combination of the blocks' options, an array of
    shape ``(O_1, …, O_n)``; ``-inf`` where every budget is 0 (an empty draft)."""
    nd = len(blocks)
    tokens = np.zeros((1,) * nd)
    for d in reversed(range(nd)):
        tokens = _axis(blocks[d].E, d, nd) + _axis(blocks[d].P, d, nd) * tokens
    tokens = 1.0 + tokens
    cost = _review_cost(blocks, pass_cost)
    for d, blk in enumerate(blocks):
        cost = cost + _axis(blk.C, d, nd)
    value = tokens * pass_cost.unit / cost
    empty = np.ones((1,) * nd, dtype=bool)
    for d, blk in enumerate(blocks):
        empty = empty & _axis(blk.budget == 0, d, nd)
    return np.where(empty, -np.inf, value)


def _review_cost(blocks: Sequence[BlockOptions], pass_cost: PassCost) -> np.ndarray:
    """``E[c_0(1 + Σ_j X_j)]`` for every combination (module docstring)."""
    total = sum(blk.positions.shape[1] - 1 for blk in blocks)
    G = pass_cost.at(0, np.arange(1, total + 2)).astype(float)
    for blk in reversed(blocks[1:]):
        windows = np.lib.stride_tricks.sliding_window_view(G, blk.positions.shape[1], axis=-1)
        G = np.einsum("ov,...xv->o...x", blk.positions, windows)
    first = blocks[0].positions
    out = first @ G.reshape(-1, G.shape[-1])[:, : first.shape[1]].T
    return out.reshape(tuple(blk.positions.shape[0] for blk in blocks))


def _stack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros((a.shape[0] + b.shape[0], max(a.shape[1], b.shape[1])))
    out[: a.shape[0], : a.shape[1]] = a
    out[a.shape[0] :, : b.shape[1]] = b
    return out


def _axis(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)
