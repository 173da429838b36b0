"""The exhaustive strategy: the exact EWIF of every configuration of a sub-space at once.

Per assignment of the lower K rows (:class:`~ewif.search.subspace.SubSpace`), numpy
broadcasting evaluates ``E[tokens] = 1 + E_1 + P_1 (E_2 + P_2 (…))`` and the expected cost
over every target row, so the full ranking is available. For a non-affine target curve the
review cost ``E[c_0(1 + Σ_j L_j)]`` couples the blocks; it is computed exactly by a backward
pass over the target blocks, ``G_(n+1)(s) = c_0(1 + s)``, ``G_j[b_j, …, s] = Σ_v P(L_j(b_j)
= v) G_(j+1)[…, s + v]``, and the first block's length pmfs contract against ``G_2`` (one
matrix product); every budget's length pmf comes from one renewal sequence, ``P(L_b = v) =
Σ_{s<b} u(s) P(R = v − s)`` (``v >= b``), by a cumulative sum over ``s``
(:func:`review_cost`). Equivalent configurations are counted once (:func:`keep`).
"""

from __future__ import annotations

import numpy as np

from ewif.search.ranking import top_with_ties
from ewif.search.subspace import Prepared, SubSpace


def exhaustive(space: SubSpace, top: int) -> list:
    """Every configuration's exact EWIF; returns the candidates for the top ``top``
    (all within 1e-9 relative of the ``top``-th best, so ties are all kept)."""
    out = []
    for sigma in space.sigmas():
        prep = space.prepare(sigma)
        first, rest, k_vals = prep.first, prep.rest, prep.k_vals
        shape = (first.P.size, *tuple(len(v) for v in k_vals[1:]))
        m = len(rest)
        N = np.zeros((1,) * m)  # E_2 + P_2 (E_3 + P_3 (…)) over the target budgets k_12..k_1n
        for d in reversed(range(m)):
            N = axis(rest[d].E, d, m) + axis(rest[d].P, d, m) * N
        N = np.broadcast_to(N, shape[1:])
        tokens = 1.0 + _expand(first.E, m) + _expand(first.P, m) * N[None, ...]
        if space.target_affine is None:
            cost = _expand(first.C, m) + review_cost(space, prep, shape)
            blocks = rest
        else:
            first_a, blocks = space.affine_blocks(prep)
            cost = space.pass_cost.unit + _expand(first_a.C, m)
        for d, blk in enumerate(blocks):
            cost = cost + axis(blk.C, d + 1, len(shape))
        ratio = tokens * space.pass_cost.unit / cost
        ratio = np.where(keep(space, prep, shape), ratio, -np.inf).reshape(-1)
        for flat in top_with_ties(ratio, top):
            pos = np.unravel_index(flat, shape)
            row_i, k11_i = divmod(int(pos[0]), len(k_vals[0]))
            target_row = [k_vals[0][k11_i]] + [
                k_vals[d][int(p)] for d, p in enumerate(pos[1:], start=1)
            ]
            out.append((float(ratio[flat]), space, (sigma, prep.rows1[row_i], target_row)))
    kept = top_with_ties(np.array([v for v, _, _ in out]), top) if out else []
    return [out[i] for i in kept]


def review_cost(space: SubSpace, prep: Prepared, shape: tuple[int, ...]) -> np.ndarray:
    """``E[c_0(1 + Σ_j L_j)]`` for every configuration of ``prep``, exactly, for any c_0.

    Backward over the target blocks: ``G_(n+1)(s) = c_0(1 + s)``, ``G_j[b_j, …, s] =
    Σ_v P(L_j(b_j) = v) G_(j+1)[…, s + v]``; the first block's length pmfs (one row per
    (row1, k11) option) then contract against ``G_2`` as one matrix product.
    """
    first, rest = prep.first, prep.rest
    total = sum(b.lengths.shape[1] - 1 for b in (first, *rest))
    G = space.pass_cost.at(0, np.arange(1, total + 2)).astype(float)
    for blk in reversed(rest):
        windows = np.lib.stride_tricks.sliding_window_view(G, blk.lengths.shape[1], axis=-1)
        G = np.einsum("bv,...sv->b...s", blk.lengths, windows)
    return (first.lengths @ G.reshape(-1, G.shape[-1]).T).reshape(shape)


def keep(space: SubSpace, prep: Prepared, shape: tuple[int, ...]) -> np.ndarray:
    """True for the configurations that stand for their equivalence class: a non-empty
    target row, and every drafter the configuration never reaches has its K row at the
    smallest allowed values (so equivalent configurations are counted once). "Reaches"
    is :func:`ewif.kernel.budgets.drafters_reached`, evaluated here for every configuration
    of ``prep`` at once (boolean arrays over the first block's options)."""
    n, nd = space.n, len(shape)
    k_vals, sigma = prep.k_vals, prep.sigma
    n11 = len(k_vals[0])

    def along_first(v: np.ndarray) -> np.ndarray:  # one value per (row1, k11) option
        return np.asarray(v).reshape((-1,) + (1,) * (nd - 1))

    def target(j: int) -> np.ndarray:
        if j == 1:
            return along_first(np.tile(np.asarray(k_vals[0]) > 0, len(prep.rows1)))
        return axis(np.asarray(k_vals[j - 1]) > 0, j - 1, nd)

    row1 = np.repeat(np.asarray(prep.rows1, dtype=np.int64), n11, axis=0) if n >= 2 else None

    def budget(q: int, j: int):  # k of drafter j when model q >= 1 reviews
        return along_first(row1[:, j - 2]) if q == 1 else sigma[q - 2][j - q - 1]

    used, reached = {}, {}
    for j in range(1, n + 1):
        u = target(j)
        for q in range(1, j):
            u = u | (reached[q] & (np.asarray(budget(q, j)) > 0))
        used[j] = u
        if j < n:
            nonzero = along_first(row1.any(axis=1)) if j == 1 else any(sigma[j - 2])
            reached[j] = u & nonzero
    keep = ~empty_mask(k_vals, shape)
    for q in range(1, n):
        lowest = tuple(min(space.allowed[q, j]) for j in range(q + 1, n + 1))
        at_min = along_first((row1 == lowest).all(axis=1)) if q == 1 else sigma[q - 2] == lowest
        keep = keep & (used[q] | at_min)
    return np.broadcast_to(keep, shape)


def empty_mask(k_vals, shape) -> np.ndarray:
    """True where every target budget is zero (an empty draft: not a cascade)."""
    mask = np.ones(shape, dtype=bool)
    k11 = np.asarray(k_vals[0])
    rows = shape[0] // len(k11)
    mask &= np.tile(k11 == 0, rows).reshape((-1,) + (1,) * (len(shape) - 1))
    for d in range(1, len(shape)):
        mask &= axis(np.asarray(k_vals[d]) == 0, d, len(shape))
    return mask


def _expand(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((-1,) + (1,) * ndim)


def axis(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)
