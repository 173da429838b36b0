"""The exact search for the best cascade: model subset, budgets K and lenience.

:func:`optimize` searches a space of :mod:`ewif.search.space`, one sub-space (a model list at
one lenience, :mod:`ewif.search.subspace`) at a time, and ranks what it found
(:mod:`ewif.search.ranking`); :mod:`ewif.search.landscape` varies two entries of a
configuration. The objective is the EWIF of :class:`ewif.kernel.cascade.Cascade` (same
semantics), through one decomposition of a target step into memoised sub-cascades and block
summaries (:mod:`ewif.search.subspace`), searched by one of two exact strategies:

* ``"exhaustive"`` (:mod:`ewif.search.exhaustive`) evaluates every configuration with numpy
  broadcasting (the full ranking is available), for any pass-cost curves;
* ``"dinkelbach"`` (:mod:`ewif.search.dinkelbach`) maximises the ratio by Dinkelbach's method
  on upper envelopes, without enumerating: exact whenever the *target's* cost is affine.

``method="auto"`` uses exhaustive search up to 5·10^6 configurations per sub-space or for a
non-affine target, else Dinkelbach; ``method="dinkelbach"`` refuses a non-affine target.
With catch-up flags the search is the exact best-first search of
:mod:`ewif.search.catch_up_search`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ewif.base import validate
from ewif.base.configuration import EvaluatedConfiguration
from ewif.files.model_set import ModelSet
from ewif.kernel.budgets import FILLS
from ewif.kernel.cascade import Cascade
from ewif.kernel.pass_cost import PassCost
from ewif.search.catch_up_search import optimize_catch_up, resolved_catch_up
from ewif.search.dinkelbach import dinkelbach
from ewif.search.exhaustive import exhaustive
from ewif.search.ranking import rank
from ewif.search.space import BoundSpec, Entry, bound_values
from ewif.search.subspace import SubSpace

_EXHAUSTIVE_LIMIT = 5_000_000


@dataclass
class OptimizeResult:
    """The optimum and a ranked table.

    ``table`` means one thing per method:

    * ``"exhaustive"``: the true top ``top`` configurations of the whole search space by
      exact EWIF (each row re-evaluated by :class:`Cascade`), exactly as a brute-force scan
      would rank them. Equivalent configurations are merged: the same models and K after
      dropping the drafters a configuration never reaches, and the same lenience unless no
      drafter reviews another (then lenience changes nothing and the smallest is shown).
      Ties in EWIF are broken by the smallest total budget ΣK, then the lexicographically
      smallest K (row by row), then the smaller lenience, then the models' order in the set.
    * ``"dinkelbach"``: the best configuration of each searched sub-space (model subset ×
      lenience), merged and ranked by the same rule — not a top-N of the whole space (within
      a sub-space that has several optima, which one is listed is not specified).
      When ``"auto"`` uses both, each sub-space contributes by its own method.

    ``best`` is ``table[0]`` (the global optimum either way). ``n_configurations`` counts
    the configurations of the search space (all subsets and leniences); ``method`` is
    ``"exhaustive"``, ``"dinkelbach"`` or both joined by ``+``; ``interrupted`` is True when
    Ctrl-C stopped the search (the result is then the best of what was searched).
    """

    best: EvaluatedConfiguration
    table: list[EvaluatedConfiguration]
    n_configurations: int
    method: str
    seconds: float
    interrupted: bool = False
    model_set: ModelSet | None = field(default=None, repr=False)
    fill: str = "tokens"
    catch_up: tuple[bool, ...] | None = None

    def cascade(self, config: EvaluatedConfiguration | None = None) -> Cascade:
        """The :class:`Cascade` of ``config`` (default: the best), with the search's catch-up
        flags."""
        c = self.best if config is None else config
        flags = None
        if self.catch_up is not None:
            flags = [self.catch_up[self.model_set.index(m)] for m in c.models]
        return self.model_set.to_cascade(c.models, c.K, c.lenience, fill=self.fill, catch_up=flags)


def as_model_set(
    source: ModelSet | Mapping[float, object] | object,
    cost: object | None = None,
    cost_per_token: object | None = None,
    names: Sequence[str] | None = None,
    cost_curve: object | None = None,
) -> ModelSet:
    """A :class:`ModelSet` from a model set, or from alpha (matrix or lenience → matrix) + costs
    (``cost`` and optionally ``cost_per_token``, or measured ``cost_curve``, where ``cost``
    may be omitted: it is the curves' ``m = 1`` values)."""
    if isinstance(source, ModelSet):
        return source
    raw = source if isinstance(source, Mapping) else {1.0: source}
    alpha = {float(k): np.array(v, dtype=float) for k, v in raw.items()}
    n1 = next(iter(alpha.values())).shape[0]
    curves = None
    if cost_curve is not None:
        table = PassCost.from_curves(cost_curve, n_models=n1)
        curves = tuple(table.table(i) for i in range(n1))
        if cost is None:
            cost = table.m1_costs()
    if cost is None:
        raise ValueError("cost (or cost_curve) is required when alpha is given as a matrix")
    cost = np.asarray(cost, dtype=float)
    cpt = np.zeros(n1) if cost_per_token is None else np.asarray(cost_per_token, dtype=float)
    names = tuple(names) if names is not None else ("target", *tuple(f"d{i}" for i in range(1, n1)))
    return ModelSet(models=names, cost=cost, cost_per_token=cpt, alpha=alpha, cost_curve=curves)


def optimize(
    source: ModelSet | Mapping[float, object] | object,
    *,
    cost: object | None = None,
    cost_per_token: object | None = None,
    cost_curve: object | None = None,
    candidates: Sequence[str] | None = None,
    bounds: tuple[int, int] | Mapping[Entry, BoundSpec] = (1, 30),
    leniences: Iterable[float] | None = None,
    subsets: bool | None = None,
    fill: str = "tokens",
    method: str = "auto",
    top: int = 10,
    progress: bool = False,
    catch_up: Sequence[bool] | None = None,
) -> OptimizeResult:
    """Search model subsets, K and lenience for the highest exact EWIF.

    Parameters
    ----------
    source : a :class:`ModelSet`, or alpha (one matrix, or a mapping lenience → matrix)
        together with ``cost`` (and optionally ``cost_per_token``) or ``cost_curve``
        (measured pass costs ``cost_curve[i][m-1]``, :mod:`ewif.kernel.pass_cost`).
    candidates : model names to choose from (target first; default all models of the set).
    bounds : ``(lo, hi)`` — every K entry of every searched cascade ranges over ``lo..hi``;
        or a mapping ``{(r, j): spec}`` with 1-based ``k_rj`` indices of the candidate list,
        ``spec`` an int (fixed), ``(lo, hi)`` (inclusive) or a list of values; entries absent
        from the mapping are 0. Entries whose alpha is missing (NaN) are forced to 0.
    leniences : leniences to try (default: every lenience of the set).
    subsets : search every non-empty ordered subset of the candidate drafters, each with
        ``bounds`` (default True for a ``(lo, hi)`` bound, False for a mapping, which
        describes one cascade's entries). With ``lo = 0`` a single search already covers
        all subsets (zero budgets drop drafters).
    method : ``"exhaustive"``, ``"dinkelbach"`` or ``"auto"`` (exhaustive up to 5·10^6
        configurations per search, or whenever the target's pass cost is a non-affine
        curve; else Dinkelbach). ``"dinkelbach"`` with a non-affine target curve raises
        ``ValueError`` (not exact there; see the module docstring).
    top : rows of the ranked table (see :class:`OptimizeResult` for what it holds).
    catch_up : one flag per model of the set (default: the set's own flags, if any): price
        the flagged models' passes with their catch-up pass (:mod:`ewif.kernel.catch_up`). The
        search is then the exact best-first search of :mod:`ewif.search.catch_up_search`
        (exhaustive; ``method="dinkelbach"`` raises ``ValueError``).

    Returns an :class:`OptimizeResult`. Raises ``ValueError`` for bad arguments or when no
    configuration of the space is valid.
    """
    ms = as_model_set(source, cost, cost_per_token, cost_curve=cost_curve)
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
    if method not in ("auto", "exhaustive", "dinkelbach"):
        raise ValueError(f"method must be 'auto', 'exhaustive' or 'dinkelbach', got {method!r}")
    top = validate.count("top", top, minimum=1)
    flags = resolved_catch_up(ms, catch_up)
    if flags is not None and any(flags[1:]):
        if method == "dinkelbach":
            raise ValueError(
                "method='dinkelbach' needs costs separable across blocks; the catch-up pass "
                "couples steps: use method='exhaustive' or 'auto'"
            )
        return optimize_catch_up(
            optimize,
            ms,
            flags,
            top,
            candidates=candidates,
            bounds=bounds,
            leniences=leniences,
            subsets=subsets,
            fill=fill,
            progress=progress,
        )
    return _optimize_plain(
        ms, method, top, progress, candidates, leniences, subsets, fill, bounds=bounds
    )


def _optimize_plain(
    ms: ModelSet,
    method: str,
    top: int,
    progress: bool,
    candidates: Sequence[str] | None,
    leniences: Iterable[float] | None,
    subsets: bool | None,
    fill: str,
    *,
    bounds: tuple[int, int] | Mapping[Entry, BoundSpec],
) -> OptimizeResult:
    """:func:`optimize` without catch-up: every sub-space searched by ``method``, the
    candidates ranked (module docstring)."""
    cands = _candidates(ms, candidates)
    lens = ms.leniences if leniences is None else tuple(map(ms.checked_lenience, leniences))
    spaces = _spaces(ms, cands, lens, bounds, subsets, fill)
    started = time.perf_counter()
    found, used_methods, interrupted = _search(spaces, method, top, progress)
    table = rank(found, top, ms)
    if not table:
        raise ValueError("no valid configuration in the search space (every cascade was empty)")
    return OptimizeResult(
        best=table[0],
        table=table,
        n_configurations=sum(s.size for s in spaces),
        method="+".join(sorted(used_methods)),
        seconds=time.perf_counter() - started,
        interrupted=interrupted,
        model_set=ms,
        fill=fill,
    )


def _candidates(ms: ModelSet, candidates: Sequence[str] | None) -> tuple[str, ...]:
    """The models to choose from: the target, at least one drafter, in the set's order."""
    cands = tuple(ms.models if candidates is None else candidates)
    idx = [ms.index(m) for m in cands]
    if idx[0] != 0 or len(cands) < 2 or sorted(set(idx)) != idx:
        raise ValueError(
            f"candidates must start with the target {ms.models[0]!r}, list at least one drafter "
            f"and follow the set's order {list(ms.models)}; got {list(cands)}"
        )
    return cands


def _spaces(
    ms: ModelSet,
    cands: tuple[str, ...],
    leniences: tuple[float, ...],
    bounds: tuple[int, int] | Mapping[Entry, BoundSpec],
    subsets: bool | None,
    fill: str,
) -> list[SubSpace]:
    """The spaces :func:`optimize` searches: one per model list (every ordered subset of the
    drafters with ``subsets``, else ``cands`` itself) and lenience."""
    uniform = not isinstance(bounds, Mapping)
    if subsets is None:
        subsets = uniform
    if subsets and not uniform:
        raise ValueError("subsets=True needs bounds=(lo, hi); a mapping describes one cascade")
    if uniform:
        allowed = bound_values("bounds", tuple(bounds))
        lo, hi = allowed[0], allowed[-1]
    drafters = cands[1:]
    groups = (
        [
            (cands[0], *s)
            for size in range(1, len(drafters) + 1)
            for s in itertools.combinations(drafters, size)
        ]
        if subsets
        else [cands]
    )
    spaces = []
    for models in groups:
        n = len(models) - 1
        spec = (
            {(r, j): (lo, hi) for r in range(1, n + 1) for j in range(r, n + 1)}
            if uniform
            else dict(bounds)
        )
        spaces.extend(SubSpace(ms, models, lenience, spec, fill) for lenience in leniences)
    return spaces


def _search(
    spaces: list[SubSpace], method: str, top: int, progress: bool
) -> tuple[list, set[str], bool]:
    """Search every space by ``method`` (``"auto"``: exhaustive up to
    :data:`_EXHAUSTIVE_LIMIT` configurations or for a non-affine target, else Dinkelbach):
    ``(candidates for :func:`~ewif.search.ranking.rank`, the methods used, whether Ctrl-C
    stopped it)``."""
    found: list = []
    used: set[str] = set()
    try:
        if progress:
            from tqdm import tqdm

            spaces = tqdm(spaces, desc="csd optimize", unit="search")
        for space in spaces:
            if space.size == 0:
                continue
            m = method
            if m == "auto":
                small = space.size <= _EXHAUSTIVE_LIMIT
                m = "exhaustive" if small or space.target_affine is None else "dinkelbach"
            used.add(m)
            found.extend(exhaustive(space, top) if m == "exhaustive" else dinkelbach(space))
    except KeyboardInterrupt:
        return found, used, True
    return found, used, False


def best_sd(
    model_set: ModelSet, drafters: Sequence[str] | None = None, k_max: int = 100
) -> EvaluatedConfiguration:
    """Best plain speculative decoding: one drafter, best ``k ∈ 1..k_max`` (exact EWIF)."""
    names = model_set.models[1:] if drafters is None else tuple(drafters)
    best = None
    for d in names:
        j = model_set.index(d)
        if np.isnan(model_set.alpha[model_set.leniences[0]][0, j]):
            continue
        r = optimize(
            model_set,
            candidates=(model_set.models[0], d),
            bounds=(1, k_max),
            leniences=model_set.leniences[:1],
            subsets=False,
            top=1,
        )
        if best is None or r.best.ewif > best.ewif:
            best = r.best
    if best is None:
        raise ValueError("no drafter has a measured acceptance rate against the target")
    return best
