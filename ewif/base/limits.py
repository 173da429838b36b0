"""Bounds on the work one request may ask for.

A command line or a model-set file can ask for arbitrarily much work (``--k-max 10000``,
``--trials 10**12``, a ``cascade`` K with budgets of 10^9). Each request is sized before
any work starts and refused with ``ValueError`` — the estimated size and the allowed
limit in the message, exit status 2 in ``csd`` — when it would not finish in about a
minute or would exhaust memory. The limits, measured on one core of a 2-core machine:

* :data:`MAX_TOTAL_BUDGET` — ``ΣK`` of one cascade (every entry of K summed). The exact
  evaluation allocates pmfs over every draft length and convolves them: memory
  ``O(ΣK)``, time up to ``O(ΣK²)``; ``ΣK = 10^5`` takes 1.5–3 s for nested 3-model
  cascades, ``1.3·10^6`` does not finish in a minute, ``10^9`` needs 7.5 GiB per array.
* :data:`MAX_CONFIGURATIONS` — configurations of one ``ewif.search.optimizer.optimize`` search
  over all its leniences, counted exactly as ``optimize`` reports them
  (:func:`ewif.search.space.space_size`). A bound mapping
  (the paper's structured space) is searched at ~3·10^8 configurations/s (``k_max = 1000``:
  3·10^9 in 11 s, 0.55 GB; ``k_max = 3000`` needs 4.4 GB and over a minute); the full
  upper-triangular space at 4·10^6–2·10^7 configurations/s.
* :data:`MAX_TRIALS` — simulated target steps (``csd simulate``: 0.4–13·10^6 steps/s,
  so 10^9 steps take minutes at worst; it shows a progress bar on a terminal).
* :data:`MAX_POSITIONS` — draft positions of an acceptance-by-position curve.
* :data:`MAX_LANDSCAPE_K` — the largest budget of a landscape (``csd plot landscape
  --k-max``): its grid evaluates ``k_max²`` cascades, 2.6 s at 30, 4.5 s at 60, 10 s at 100
  for the default preset's four-model cascade.
* :data:`MAX_PLOT_POSITIONS` — draft positions one figure shows (``csd plot decay
  --max-position``), each with its interval.
* :data:`MAX_TOP` — rows of ``csd recommend``'s ranked table (each row is kept in memory
  while the search runs).
"""

from __future__ import annotations

import numpy as np

MAX_TOTAL_BUDGET = 100_000
MAX_CONFIGURATIONS = {"structured": 4 * 10**9, "full": 10**8}
MAX_TRIALS = 10**9
MAX_POSITIONS = 10**5
MAX_TOP = 10_000
MAX_LANDSCAPE_K = 100
MAX_PLOT_POSITIONS = 1000


def total_budget(name: str, K: np.ndarray) -> int:
    """``ΣK`` of a validated non-negative integer K; ``ValueError`` above
    :data:`MAX_TOTAL_BUDGET`."""
    total = sum(int(k) for k in np.asarray(K).flat)  # Python ints: no int64 overflow
    if total > MAX_TOTAL_BUDGET:
        raise ValueError(
            f"{name} budgets total {total:,} draft tokens per target step; at most "
            f"{MAX_TOTAL_BUDGET:,} are allowed (exact evaluation convolves pmfs over every "
            "draft length)"
        )
    return total


def at_most(name: str, value: int, limit: int, unit: str) -> int:
    """An already validated count ``value``; ``ValueError`` above ``limit``."""
    if value > limit:
        raise ValueError(f"{name} must be at most {limit:,} {unit}, got {value:,}")
    return value
