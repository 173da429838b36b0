"""Dinkelbach's strategy: the best configuration of a sub-space without enumerating it.

It maximises the ratio ``N/D`` (expected tokens over expected cost of a target step) by
Dinkelbach's method: ``λ`` is optimal iff ``max (N − λD) = 0``; for fixed ``λ`` the
objective is ``1 − λ(c_0+cpt_0) + Σ_j [(Π_{i<j} P_i) E_j − λ C_j]`` (the block summaries of
:mod:`ewif.search.subspace`), whose maximum over blocks ``j..n`` is a convex piecewise-linear
function ``Φ_j(p)`` of the prefix product ``p = Π_{i<j} P_i``: ``Φ_j(p) = max_b [p E_j(b) −
λ C_j(b) + Φ_{j+1}(p P_j(b))]``. Each ``Φ_j`` is kept exactly as the upper envelope of its
lines (convex-hull trick, :mod:`ewif.search.envelope`), so one Dinkelbach iteration costs one
pass over the first drafter's options instead of the full product of the target row.
Started at the ratio of the empty draft (autoregressive decoding), every iteration strictly
increases ``λ`` and the search stops when no configuration has ``N − λD > 0``: the last
argmax is a global optimum (exact, not heuristic; it typically takes 3–6 iterations). Why
Dinkelbach and not branch-and-bound: the parametric objective is *separable* across target
blocks, which makes its exact maximum cheap, whereas bounds on a ratio of coupled products
prune poorly when budgets may be zero. Separability needs an affine *target* cost: a
non-affine target curve is refused.
"""

from __future__ import annotations

import numpy as np

from ewif.search import envelope
from ewif.search.subspace import SubSpace

DINKELBACH_CURVE = (
    "method='dinkelbach' needs an affine target pass cost: with a non-affine target curve "
    "c_0(m) the review cost E[c_0(1 + sum_j L_j)] is not separable across the target's "
    "blocks, so Dinkelbach's block-by-block maximum is not exact; use method='exhaustive' "
    "(or 'auto', which picks it)"
)


def dinkelbach(space: SubSpace) -> list:
    """The best configuration of ``space`` as ``[(EWIF, space, position)]`` (empty when
    no speculative configuration beats the empty draft)."""
    if space.target_affine is None:
        raise ValueError(DINKELBACH_CURVE)
    unit = space.pass_cost.unit
    prepared = []
    for sigma in space.sigmas():
        prep = space.prepare(sigma)
        first, rest = space.affine_blocks(prep)
        prepared.append((prep, first, [np.stack([b.P, b.E, b.C]) for b in rest]))
    lam = 1.0 / unit  # ratio N/D of the empty draft (= autoregressive)
    best = None
    while True:
        value, arg = -np.inf, None
        for prep, first, rest in prepared:
            v, choice = envelope.query(envelope.lines(rest, lam), first.P)
            total = 1.0 - lam * unit + first.E - lam * first.C + v
            i = int(np.argmax(total))
            if total[i] > value:
                value, arg = total[i], (prep, first, rest, i, choice[i])
        if value <= 1e-12 * lam:
            break
        prep, first, rest, i, path = arg
        tokens, cost, p = 1.0 + first.E[i], unit + first.C[i], first.P[i]
        for blk, b in zip(rest, path, strict=True):
            P, E, C = blk[:, b]
            tokens, cost, p = tokens + p * E, cost + C, p * P
        new = tokens / cost
        if new <= lam * (1.0 + 1e-15):
            break
        lam = new
        k_vals = prep.k_vals
        row_i, k11_i = divmod(i, len(k_vals[0]))
        target_row = [k_vals[0][k11_i]] + [k_vals[d][b] for d, b in enumerate(path, start=1)]
        best = (prep.sigma, prep.rows1[row_i], target_row)
    if best is None or not any(best[2]):
        return []
    return [(lam * unit, space, best)]
