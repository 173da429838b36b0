"""The structure of a budget matrix K: its rows, the leaf rule, the drafters a call reaches.

Semantics are those of :mod:`ewif.kernel.cascade` (the contract): ``K`` is upper-triangular
``n×n``; row ``r`` holds the budgets model ``r`` gives drafters ``r+1..n`` when it reviews.
``FILLS`` names the two readings of how a nested block is filled (``"tokens"``: until it
holds at least its budget; ``"rounds"``: exactly that many review calls).

Rows: the K rows of models ``r..n−1`` as a tuple ``rows`` with ``rows[i]`` the budgets of
model ``r + i`` for drafters ``r+i+1..n`` (``K[r+i, r+i:]`` of the ``n×n`` K), so one review
call depends on nothing else and memoises under the key ``(r, rows)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

FILLS = ("tokens", "rounds")

Rows = tuple[tuple[int, ...], ...]


def is_leaf(K: Sequence[Sequence[int]] | np.ndarray, j: int) -> bool:
    """The leaf rule: drafter ``j`` generates its blocks itself iff ``j`` is the last model
    (``j >= len(K)``, K having one row per reviewer) or its own K row is all zero.

    Works on the ``n×n`` K (``j`` a model index) and on :data:`Rows` of models ``r..n−1``
    (``j`` relative to ``r``).
    """
    return j >= len(K) or not any(K[j])


def rows_of(K: np.ndarray, r: int = 0) -> Rows:
    """The :data:`Rows` of models ``r..n−1`` of an ``n×n`` upper-triangular ``K``."""
    return tuple(tuple(int(x) for x in K[q, q:]) for q in range(r, K.shape[0]))


def drafters_reached(r: int, rows: Rows) -> frozenset[int]:
    """The drafters a review call of ``r`` makes passes of (``r`` excluded), given the
    :data:`Rows` of models ``r..n−1``: every drafter with a positive budget in ``r``'s row,
    and recursively those of the non-leaf ones (``drafters_reached(0, rows_of(K))``: the
    drafters a configuration uses)."""
    n = r + len(rows)
    out: set[int] = set()
    stack = [r]
    while stack:
        x = stack.pop()
        for j, b in zip(range(x + 1, n + 1), rows[x - r], strict=True):
            if b and j not in out:
                out.add(j)
                if not is_leaf(rows, j - r):
                    stack.append(j)
    return frozenset(out)
