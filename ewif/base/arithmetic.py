"""Numerical kernels: cancellation-free geometric sums, and raw pmf-array arithmetic.

All closed forms of the paper contain ``(1 − r^(m+1))/(1 − r)``, which loses every digit
when ``r → 1`` (at ``r = 1 − 1e-9`` the naive form has relative error ~1e-7). Here it is
evaluated as ``−expm1((m+1)·log1p(−(1−r)))/(1−r)``: with ``1 − r`` supplied accurately, each
step has relative error of a few ulps (expm1's condition number ``|y e^y/expm1(y)|`` is
≤ 1 for y ≤ 0), so the sum is accurate to ~1e-15 relative for every ``r ∈ [0, 1]``.
The edges are exact: ``m = −1`` gives 0, ``m = 0`` gives 1, ``r = 1`` gives ``m + 1``,
``r = 0`` gives 1.
"""

from __future__ import annotations

import numpy as np


def geometric_sum(gap: float | np.ndarray, m: int | np.ndarray) -> np.ndarray:
    """``Σ_{i=0}^{m} r^i = (1 − r^(m+1))/(1 − r)`` given ``gap = 1 − r ∈ [0, 1]``, ``m ≥ −1``.

    The ratio enters only through ``gap`` so that callers who know ``1 − r`` more accurately
    than ``1 - r`` could be computed (as a product of positive factors) keep that accuracy.
    Broadcasts over ``gap`` and ``m``; arguments are not validated (internal helper).
    Returns an ndarray (0-d for scalar inputs).
    """
    gap = np.asarray(gap, dtype=float)
    m = np.asarray(m, dtype=np.int64)
    terms = m + 1.0
    with np.errstate(divide="ignore", invalid="ignore"):  # gap = 0 (0/0) and gap = 1 (log 0)
        general = -np.expm1(terms * np.log1p(-gap)) / gap
    # m ∈ {−1, 0} and r = 1 both give m + 1; r = 0 needs no case: expm1(−inf) = −1.
    return np.where((m <= 0) | (gap == 0.0), terms, general)


def pmf_power(pmf: np.ndarray, n: int) -> np.ndarray:
    """The pmf of the sum of ``n`` i.i.d. counts with pmf ``pmf``: the ``n``-fold
    convolution, by repeated squaring (``n = 0`` gives the point mass at 0)."""
    out, base = np.ones(1), pmf
    while n:
        if n & 1:
            out = np.convolve(out, base)
        n >>= 1
        if n:
            base = np.convolve(base, base)
    return out


def padded_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` of two coefficient arrays of possibly different lengths (zero-padded)."""
    if a.size < b.size:
        a, b = b, a
    out = a.copy()
    out[: b.size] += b
    return out
