"""Upper envelopes of lines on [0, 1] (the convex-hull trick behind Dinkelbach's step).

For a fixed ratio ``λ`` the optimizer's parametric objective over target blocks ``j..n`` is
a convex piecewise-linear function ``Φ_j(p)`` of the prefix product ``p ∈ [0, 1]``:
``Φ_j(p) = max_b [p E_j(b) − λ C_j(b) + Φ_(j+1)(p P_j(b))]``. :func:`lines` keeps each
``Φ_j`` exactly as the upper envelope of its lines, built from the last block back;
:func:`hull` drops the lines that are never a maximiser on ``[0, 1]``; :func:`query`
evaluates the envelope and returns the maximising line's choices.
"""

from __future__ import annotations

import numpy as np


def lines(rest: list[np.ndarray], lam: float):
    """Upper envelope of Φ_2 as (slopes, intercepts, choices), built from the last block back."""
    m, c, ch = np.zeros(1), np.zeros(1), np.zeros((1, 0), dtype=np.int64)
    for blk in reversed(rest):
        P, E, C = blk
        nb = P.size
        m2 = (E[:, None] + P[:, None] * m[None, :]).reshape(-1)
        c2 = (-lam * C[:, None] + c[None, :]).reshape(-1)
        ch2 = np.concatenate(
            [np.repeat(np.arange(nb), m.size)[:, None], np.tile(ch, (nb, 1))], axis=1
        )
        keep = hull(m2, c2)
        m, c, ch = m2[keep], c2[keep], ch2[keep]
    return m, c, ch


def hull(m: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indices of lines ``y = m x + c`` that contain a maximiser for every ``x ∈ [0, 1]``.

    Convex-hull trick: sort by slope (ties keep the larger intercept); a line between two
    others is dropped when its neighbours cross before it overtakes the left one; a line
    that only overtakes the current top beyond ``x = 1`` is never a maximiser on [0, 1].
    """
    order = np.lexsort((-c, m))
    stack: list[int] = []
    for i in order:
        if stack and m[stack[-1]] == m[i]:
            continue
        while stack:
            j = stack[-1]
            if c[j] <= c[i]:  # m[j] < m[i]: i is at least as high on all x >= 0
                stack.pop()
                continue
            if len(stack) >= 2:
                k = stack[-2]
                if (c[k] - c[i]) * (m[j] - m[k]) <= (c[k] - c[j]) * (m[i] - m[k]):
                    stack.pop()
                    continue
            break
        if stack and (c[stack[-1]] - c[i]) >= (m[i] - m[stack[-1]]):
            continue  # i overtakes the top only at x >= 1
        stack.append(i)
    return np.asarray(stack, dtype=np.int64)


def query(hull, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """max over envelope lines at points p, and the choice path of the maximising line."""
    m, c, ch = hull
    vals = p[:, None] * m[None, :] + c[None, :] if m.size <= 64 else None
    if vals is None:  # large envelope: chunk to bound memory
        best = np.empty(p.size, dtype=np.int64)
        for s in range(0, p.size, 4096):
            best[s : s + 4096] = np.argmax(p[s : s + 4096, None] * m + c, axis=1)
    else:
        best = np.argmax(vals, axis=1)
    return p * m[best] + c[best], ch[best]
