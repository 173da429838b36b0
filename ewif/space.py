"""The search spaces of the optimizer: the paper's space and the full upper-triangular one.

* :func:`paper_bounds` — the paper's space for (target, BASE, SMALL, MaG): ``k11, k12, k22``
  in ``1..k_max`` and every Max-Gram budget fixed at ``mag_block`` (Table 5 / Appendix B);
* the *full* space — every upper-triangular K with entries ``0..k_max`` (zero budgets drop
  drafters, so it covers every drafter subset);
* :func:`search_space` — the default of every command (``"auto"``: the paper's space for the
  paper's family, :func:`is_paper_shape`, else the full one).

A space is given to :func:`ewif.search.optimize` as bounds: ``(lo, hi)`` for every entry, or
a mapping ``{(r, j): spec}`` whose specs :func:`bound_values` reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ewif import validate
from ewif.io import ModelSet

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
