"""Ranking the optimizer's candidates: merged, re-evaluated exactly, ties ordered by one rule.

Equivalent configurations are merged, each remaining candidate is re-evaluated exactly by
:class:`~ewif.kernel.cascade.Cascade`, and ties are ordered by :func:`_order`."""

from __future__ import annotations

import numpy as np

from ewif.base.configuration import EvaluatedConfiguration
from ewif.files.model_set import ModelSet
from ewif.search.subspace import SubSpace


def rank(found: list, top: int, ms: ModelSet) -> list[EvaluatedConfiguration]:
    """The true top ``top``: equivalent configurations merged, each re-evaluated exactly by
    :class:`Cascade`, ordered by :func:`_order`.

    ``found`` holds ``(value, space, args)`` candidates whose ``value`` (the vectorised
    EWIF) is within rounding of the exact one; all candidates within 1e-9 relative of the
    ``top``-th best distinct configuration are re-evaluated, so ties are decided exactly.
    """
    merged: dict[tuple, tuple[float, SubSpace, tuple[str, ...], np.ndarray]] = {}
    for value, space, args in found:
        models, K = space.config_of(*args)
        key = _key(models, K, space.lenience)
        old = merged.get(key)
        if old is None:
            merged[key] = (value, space, models, K)
        else:  # the same configuration: keep the best value and the smallest lenience
            low = old[1] if old[1].lenience <= space.lenience else space
            merged[key] = (max(value, old[0]), low, models, K)
    items = list(merged.values())
    keep = top_with_ties(np.array([v for v, *_ in items]), top) if items else []
    out = [items[i][1].evaluate(items[i][2], items[i][3]) for i in keep]
    out.sort(key=lambda c: _order(c, ms))
    return out[:top]


def _key(models: tuple[str, ...], K: np.ndarray, lenience: float) -> tuple:
    """Equivalence of configurations: the same canonical models and K, and the same lenience
    unless no drafter reviews another (then lenience changes nothing: alpha's target row is
    the same at every lenience)."""
    return (models, K.tobytes(), lenience if K[1:].any() else None)


def _order(c: EvaluatedConfiguration, ms: ModelSet) -> tuple:
    """Ranking: higher EWIF first; ties broken by the smallest total budget ΣK, then the
    lexicographically smallest K (row by row), then the smaller lenience, then the models'
    positions in the set."""
    return (-c.ewif, int(c.K.sum()), c.K.tolist(), c.lenience, [ms.index(m) for m in c.models])


def top_with_ties(values: np.ndarray, top: int) -> np.ndarray:
    """Indices of the finite ``values`` at least as large as the ``top``-th largest, less a
    1e-9 relative margin (so every possible tie, up to rounding, is kept)."""
    finite = np.isfinite(values)
    count = int(finite.sum())
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    k = min(top, count)
    kth = np.partition(values[finite], count - k)[count - k]
    return np.flatnonzero(finite & (values >= kth - 1e-9 * abs(kth)))
