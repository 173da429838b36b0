"""The horizontal cascade (Section 4.2): position-dependent acceptance and cost.

Draft token ``i`` (``i = 1..k``) comes from a model with acceptance ``α_i`` and cost ``c_i``
(target time units). Token ``i`` is used iff tokens ``1..i`` are all accepted, so the
expected tokens per step are ``N = Σ_{i=0}^{k} Π_{j=1}^{i} α_j`` (the ``i = 0`` term is the
target's own token) and the cost is ``D = 1 + Σ_i c_i``.

Arrays: the LAST axis is the position ``i``; leading axes broadcast (one EWIF per
leading index). ``k = 0`` (an empty last axis) gives EWIF 1.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ewif.base import validate


class HorizontalGradient(NamedTuple):
    """Partial derivatives of the horizontal EWIF; both arrays have the positions last."""

    alpha: np.ndarray  # dT/dα_l
    cost: np.ndarray  # dT/dc_l (the same for every l: −N/D²)


def horizontal_ewif(alphas: object, costs: object) -> float | np.ndarray:
    """Theorem 4.5: ``T = (Σ_{i=0}^{k} Π_{j=1}^{i} α_j) / (1 + Σ_{i=1}^{k} c_i)``.

    With all ``α_i = α`` and ``c_i = c`` it reduces to Corollary 4.2, ``sd_ewif(α, k, c)``.
    Float for 1-D input, ndarray of the leading shape otherwise.
    """
    a, c = _inputs(alphas, costs)
    result = _numerator(a) / _denominator(c)
    return float(result) if result.ndim == 0 else result


def horizontal_gradient(alphas: object, costs: object) -> HorizontalGradient:
    """Corollary 4.6: ``dT/dα_l = (Σ_{i=l}^{k} Π_{j≤i, j≠l} α_j) / D`` and
    ``dT/dc_l = −N/D²``.

    Computed without dividing by ``α_l`` as ``P_{l−1} R_l / D`` with the prefix product
    ``P_{l−1} = Π_{j<l} α_j`` and the suffix sum ``R_l = 1 + α_{l+1} R_{l+1}``, ``R_k = 1``.
    Since ``R_1 ≥ 1 ≥ P_{k−1}``, ``dT/dα_1 ≥ dT/dα_k``; equality holds iff ``k = 1`` or
    ``k = 2`` with ``α_1 = 1, α_2 = 0`` (the paper states it strictly). For non-increasing
    ``α`` every adjacent pair is ordered, ``dT/dα_l ≥ dT/dα_{l+1}``
    (``(α_l − α_{l+1}) R_{l+1} ≤ (1 − α_{l+1}) G(α_{l+1}, k−l−1) ≤ 1``), but not in general:
    ``α = (0.9, 0.1, 0.9)`` gives ``dT/dα_2 > dT/dα_1``.
    """
    a, c = _inputs(alphas, costs)
    denominator = _denominator(c)[..., None]
    k = a.shape[-1]
    prefix = np.cumprod(np.concatenate([np.ones((*a.shape[:-1], 1)), a[..., :-1]], -1), -1)
    suffix = np.ones(a.shape)
    for pos in range(k - 2, -1, -1):
        suffix[..., pos] = 1.0 + a[..., pos + 1] * suffix[..., pos + 1]
    numerator = _numerator(a)[..., None]
    d_alpha = prefix * suffix / denominator
    d_cost = np.broadcast_to(-numerator / denominator**2, a.shape).copy()
    return HorizontalGradient(d_alpha, d_cost)


def _numerator(a: np.ndarray) -> np.ndarray:
    """``1 + α_1(1 + α_2(1 + … (1 + α_k)))`` by Horner, one position (column) at a time."""
    acc = np.ones(a.shape[:-1])
    for pos in range(a.shape[-1] - 1, -1, -1):
        np.multiply(a[..., pos], acc, out=acc)
        acc += 1.0
    return acc


def _denominator(c: np.ndarray) -> np.ndarray:
    """``1 + Σ_i c_i`` summed column by column (fast for a short last axis)."""
    acc = np.ones(c.shape[:-1])
    for pos in range(c.shape[-1]):
        acc += c[..., pos]
    return acc


def _inputs(alphas: object, costs: object) -> tuple[np.ndarray, np.ndarray]:
    a = validate.probabilities("alphas", alphas)
    c = validate.costs("costs", costs)
    if a.ndim == 0 or c.ndim == 0:
        raise ValueError(
            "alphas and costs must be arrays with the positions on the last axis, got "
            f"shapes {a.shape} and {c.shape}"
        )
    if a.shape[-1] != c.shape[-1]:
        raise ValueError(
            "alphas and costs must have the same length (last axis), got "
            f"len(alphas)={a.shape[-1]}, len(costs)={c.shape[-1]}"
        )
    try:
        lead = np.broadcast_shapes(a.shape[:-1], c.shape[:-1])
    except ValueError:
        raise ValueError(
            f"alphas and costs leading axes must broadcast, got shapes {a.shape} and {c.shape}"
        ) from None
    k = a.shape[-1]
    return np.broadcast_to(a, (*lead, k)), np.broadcast_to(c, (*lead, k))
