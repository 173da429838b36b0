"""Algorithm 1's definitions as the witnesses read them, stated here on their own.

The contract is written once, in the docstring of :mod:`ewif.kernel.cascade`. ``simulate``
plays it without importing a line of ``ewif``'s evaluation (that is what makes it a
witness), so the few definitions its engines share are stated again here, from the
contract's words:

* a **fill** says when a nested block is full: ``"tokens"`` once it holds at least its
  budget of tokens, ``"rounds"`` after exactly that many review calls;
* the **leaf rule**: in the ``n×n`` budget matrix ``K`` (row ``r`` holds the budgets model
  ``r`` gives drafters ``r+1..n``, ``K[r][j − 1]`` drafter ``j``'s), drafter ``j``
  generates its blocks itself, one token a pass, when it is the last model (``j = n``, it
  has no row) or gives no drafter a budget (its row is all zero);
* a review call of model ``r`` **reaches** the drafters it gives a positive budget and,
  recursively, those that every reached non-leaf reaches: the models it makes passes of.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The two fills of a nested block (module docstring).
FILLS = ("tokens", "rounds")


def is_leaf(K: Sequence[Sequence[int]] | np.ndarray, j: int) -> bool:
    """Whether drafter ``j`` of the ``n×n`` ``K`` generates its blocks itself (module
    docstring; ``j = n``, the last model, always does)."""
    return j == len(K) or not np.any(K[j])


def reached(K: Sequence[Sequence[int]] | np.ndarray, r: int) -> set[int]:
    """The drafters a review call of model ``r`` makes passes of (module docstring)."""
    n = len(K)
    found: set[int] = set()
    callers = [r]
    while callers:
        x = callers.pop()
        for j in range(x + 1, n + 1):
            if K[x][j - 1] and j not in found:
                found.add(j)
                if not is_leaf(K, j):
                    callers.append(j)
    return found
