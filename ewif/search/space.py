"""The search spaces of the optimizer: the paper's space and the full upper-triangular one.

* :func:`paper_bounds` — the paper's space for (target, BASE, SMALL, MaG): ``k11, k12, k22``
  in ``1..k_max`` and every Max-Gram budget fixed at ``mag_block`` (Table 5 / Appendix B);
* the *full* space — every upper-triangular K with entries ``0..k_max`` (zero budgets drop
  drafters, so it covers every drafter subset);
* :func:`search_space` — the default of every command (``"auto"``: the paper's space for the
  paper's family, :func:`is_paper_shape`, else the full one).

A space is given to :func:`ewif.search.optimizer.optimize` as bounds: ``(lo, hi)`` for every entry,
or a mapping ``{(r, j): spec}`` whose specs :func:`bound_values` reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ewif.base import limits, validate
from ewif.files.model_set import ModelSet

Entry = tuple[int, int]  # (r, j) 1-based as in k_rj
BoundSpec = int | tuple[int, int] | Sequence[int]


def bound_values(name: str, spec: BoundSpec) -> tuple[int, ...]:
    """The budgets one bound spec allows, checked: an int (that value), a tuple ``(lo, hi)``
    (inclusive, ``lo <= hi``) or a list of values (at least one), every value an integer
    >= 0; ``ValueError`` naming ``name`` otherwise."""
    if not isinstance(spec, Iterable):
        return (validate.count(name, spec),)
    if isinstance(spec, tuple) and len(spec) == 2:
        lo, hi = (validate.count(name, v) for v in spec)
        if lo > hi:
            raise ValueError(f"{name} range must satisfy lo <= hi, got {spec!r}")
        return tuple(range(lo, hi + 1))
    values = tuple(sorted({validate.count(name, v) for v in spec}))
    if not values:
        raise ValueError(f"{name} must allow at least one value")
    return values


def paper_bounds(k_max: int = 30, mag_block: int = 10) -> dict[Entry, BoundSpec]:
    """The paper's search space for (target, BASE, SMALL, MaG): ``k11, k12, k22 ∈ 1..k_max``
    and every MaG budget ``k13 = k23 = k33 = mag_block`` (Table 5 / Appendix B)."""
    k_max = validate.count("k_max", k_max, minimum=1)
    mag_block = validate.count("mag_block", mag_block, minimum=0)
    rng = (1, k_max)
    return {
        (1, 1): rng,
        (1, 2): rng,
        (2, 2): rng,
        (1, 3): mag_block,
        (2, 3): mag_block,
        (3, 3): mag_block,
    }


class SearchSpace(NamedTuple):
    """Bounds for :func:`optimize`, a human label, and the largest free budget ``k_max``."""

    bounds: dict[Entry, BoundSpec] | tuple[int, int]
    label: str
    k_max: int


def is_paper_shape(model_set: ModelSet) -> bool:
    """True for the paper's family: target, BASE, SMALL (costlier first) and a free MaG."""
    c = model_set.cost
    return len(model_set.models) == 4 and c[3] == 0 and c[1] >= c[2] > 0


def search_space(
    model_set: ModelSet, space: str = "auto", k_max: int | None = None, mag_block: int = 10
) -> SearchSpace:
    """The default search space of ``csd recommend`` (and ``csd simulate``).

    ``space="paper"``: :func:`paper_bounds` (needs the paper's 4-model shape), ``k_max``
    default 30. ``"full"``: every upper-triangular K with entries ``0..k_max`` (default 12;
    zero budgets drop drafters, so all subsets are searched). ``"auto"``: paper when
    :func:`is_paper_shape`, else full.
    """
    if space not in ("auto", "paper", "full"):
        raise ValueError(f"space must be 'auto', 'paper' or 'full', got {space!r}")
    if space == "auto":
        space = "paper" if is_paper_shape(model_set) else "full"
    k_max = validate.count(
        "k_max",
        30 if space == "paper" and k_max is None else 12 if k_max is None else k_max,
        minimum=1,
    )
    if space == "paper":
        if len(model_set.models) != 4:
            raise ValueError(
                f"the paper space needs 4 models (target, BASE, SMALL, MaG), the set has "
                f"{list(model_set.models)}"
            )
        label = f"paper space: k11, k12, k22 in 1..{k_max}, MaG blocks {mag_block}"
        return SearchSpace(paper_bounds(k_max, mag_block), label, k_max)
    label = f"full upper-triangular K, entries 0..{k_max} (all drafter subsets)"
    return SearchSpace((0, k_max), label, k_max)


def space_size(
    alpha: Mapping[float, np.ndarray],
    n_models: int,
    bounds: tuple[int, int] | Mapping[Entry, BoundSpec],
    leniences: Iterable[float],
    hint: str,
) -> int:
    """Configurations of the search ``optimize(bounds=bounds, subsets=False)`` over all
    ``n_models`` models of a set with acceptance matrices ``alpha`` (lenience → matrix) at
    ``leniences``: the product over K entries ``k_rj`` of their number of values (one
    where ``alpha[r-1, j]`` is unknown, NaN), summed over leniences. ``ValueError`` above
    :data:`ewif.base.limits.MAX_CONFIGURATIONS` (``"structured"`` for a mapping, ``"full"`` for
    ``(lo, hi)``) or when a configuration's ``ΣK`` can exceed
    :data:`ewif.base.limits.MAX_TOTAL_BUDGET`; the message ends with ``hint`` (what the user can
    change). The bounds are read by
    :func:`bound_values`, as ``optimize`` reads them.
    """
    n = n_models - 1
    entries = [(r, j) for r in range(1, n + 1) for j in range(r, n + 1)]
    if isinstance(bounds, Mapping):
        kind = "structured"
        values = {
            (r, j): bound_values(f"bounds k_{r}{j}", bounds.get((r, j), 0)) for r, j in entries
        }
    else:
        kind, values = "full", dict.fromkeys(entries, bound_values("bounds", tuple(bounds)))
    size = 0
    for lenience in set(leniences) & set(alpha):  # optimize reports unknown leniences
        known = [e for e in entries if not np.isnan(alpha[lenience][e[0] - 1, e[1]])]
        largest = sum(max(values[e], default=0) for e in known)
        if largest > limits.MAX_TOTAL_BUDGET:
            raise ValueError(
                f"the search space holds cascades whose budgets total {largest:,} draft "
                f"tokens; at most {limits.MAX_TOTAL_BUDGET:,} are allowed: {hint}"
            )
        size += math.prod(len(values[e]) for e in known)
    if size > limits.MAX_CONFIGURATIONS[kind]:
        raise ValueError(
            f"the search space holds {_approx(size)} configurations ({kind} bounds over "
            f"{n_models} models); at most {limits.MAX_CONFIGURATIONS[kind]:.0e} are searched "
            f"(about a minute): {hint}"
        )
    return size


def _approx(n: int) -> str:
    """``n`` in 3 significant digits, also beyond the float range."""
    digits = len(str(n))
    return f"{n:.3g}" if digits < 300 else f"~1e{digits - 1}"
