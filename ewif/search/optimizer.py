"""The exact search for the best cascade: model subset, budgets K and lenience.

:func:`optimize` searches a space of :mod:`ewif.search.space`; the upper envelopes behind
Dinkelbach's step are :mod:`ewif.search.envelope`; :mod:`ewif.search.landscape` varies two entries
of a configuration.

The objective is the EWIF of :class:`ewif.kernel.cascade.Cascade` (same semantics). Two exact
strategies share one decomposition of a target step:

* **Memoised sub-cascades.** A model's K row is the same wherever it reviews, so one
  review call of drafter ``r`` depends only on the rows of models ``r..n−1``; each is
  computed once per lenience by the kernel :func:`ewif.kernel.review_call.review_call` (the one
  :class:`Cascade` uses) and reused by every configuration that contains it.
* **Block summaries.** At the target the draft is a sequence of independent blocks; the
  target step only needs, per block ``j`` and budget ``b``, the length pmf of ``L_j(b)``
  (for a ``tokens`` block every budget at once from one renewal sequence,
  :func:`ewif.kernel.review_call.block_lengths`), hence ``P_j = E[a^L]`` (whole block accepted),
  ``E_j = E[Σ_{i=1}^{L} a^i]`` (expected accepted tokens in it), ``E[L]``, and the block's
  expected drafter cost ``C_j`` (Wald). Then ``E[tokens] = 1 + E_1 + P_1 (E_2 + P_2 (E_3 +
  …))`` and, for an affine target ``c_0(m) = c_0 + cpt_0·m``, ``E[cost] = c_0 + cpt_0 +
  Σ_j (C_j + cpt_0 E[L_j])``.

**Pass-cost curves.** With measured curves ``c_i(m)`` (:mod:`ewif.kernel.pass_cost`) the
drafters' curves only enter the memoised review calls (their cost is per block, so still
separable). The target's review costs ``E[c_0(1 + Σ_j L_j)]``: for an affine ``c_0(m) =
a_0 + s_0 m`` that is ``c_0(1) + s_0 Σ_j E[L_j]`` (separable, as above), but for a
non-affine target curve it couples the blocks. The exhaustive search then computes it
exactly by a backward pass over the target blocks, ``G_(n+1)(s) = c_0(1 + s)``,
``G_j[b_j, …, s] = Σ_v P(L_j(b_j) = v) G_(j+1)[…, s + v]``, and contracts the first
block's length pmfs against ``G_2`` (one matrix product); every budget's length pmf comes
from one renewal sequence, ``P(L_b = v) = Σ_{s<b} u(s) P(R = v − s)`` (``v >= b``), by a
cumulative sum over ``s``. Dinkelbach relies on separability, so it is exact whenever the
*target's* cost is affine; ``method="auto"`` uses exhaustive search for a non-affine
target and ``method="dinkelbach"`` refuses it.

``"exhaustive"`` evaluates these formulas for every configuration with numpy
broadcasting (the full ranking is available). ``"dinkelbach"`` maximises the ratio
``N/D`` by Dinkelbach's method: ``λ`` is optimal iff ``max (N − λD) = 0``; for fixed ``λ``
the objective is ``1 − λ(c_0+cpt_0) + Σ_j [(Π_{i<j} P_i) E_j − λ C_j]``, whose maximum over
blocks ``j..n`` is a convex piecewise-linear function ``Φ_j(p)`` of the prefix product
``p = Π_{i<j} P_i``: ``Φ_j(p) = max_b [p E_j(b) − λ C_j(b) + Φ_{j+1}(p P_j(b))]``. Each
``Φ_j`` is kept exactly as the upper envelope of its lines (convex-hull trick), so one
Dinkelbach iteration costs one pass over the first drafter's options instead of the full
product of the target row. Started at the ratio of the empty draft (autoregressive
decoding), every iteration strictly increases ``λ`` and the search stops when no
configuration has ``N − λD > 0``: the last argmax is a global optimum (exact, not
heuristic; it typically takes 3–6 iterations). Why Dinkelbach and not branch-and-bound:
the parametric objective is *separable* across target blocks, which makes its exact
maximum cheap, whereas bounds on a ratio of coupled products prune poorly when budgets
may be zero.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ewif.base import validate
from ewif.files.model_set import ModelSet
from ewif.kernel.budgets import drafters_reached, is_leaf, rows_of
from ewif.kernel.cascade import FILLS, Cascade
from ewif.kernel.pass_cost import PassCost
from ewif.kernel.review_call import block_lengths, review_call
from ewif.search import envelope
from ewif.search.catch_up_search import catch_up_flags, optimize_catch_up
from ewif.search.space import BoundSpec, Entry, bound_values

_EXHAUSTIVE_LIMIT = 5_000_000


@dataclass(frozen=True)
class Configuration:
    """One evaluated cascade: model names (target first), K, lenience and its exact EWIF."""

    models: tuple[str, ...]
    K: np.ndarray
    lenience: float
    ewif: float

    def describe(self) -> str:
        return f"{' > '.join(self.models)}  K={self.K.tolist()}  l={self.lenience:g}"


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

    best: Configuration
    table: list[Configuration]
    n_configurations: int
    method: str
    seconds: float
    interrupted: bool = False
    model_set: ModelSet | None = field(default=None, repr=False)
    fill: str = "tokens"
    catch_up: tuple[bool, ...] | None = None

    def cascade(self, config: Configuration | None = None) -> Cascade:
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
    flags = catch_up_flags(ms, catch_up)
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
    cands = _candidates(ms, candidates)
    lens = ms.leniences if leniences is None else tuple(map(ms.checked_lenience, leniences))
    spaces = _spaces(ms, cands, lens, bounds, subsets, fill)
    started = time.perf_counter()
    found, used_methods, interrupted = _search(spaces, method, top, progress)
    table = _rank(found, top, ms)
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
) -> list[_Space]:
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
        spaces.extend(_Space(ms, models, lenience, spec, fill) for lenience in leniences)
    return spaces


def _search(
    spaces: list[_Space], method: str, top: int, progress: bool
) -> tuple[list, set[str], bool]:
    """Search every space by ``method`` (``"auto"``: exhaustive up to
    :data:`_EXHAUSTIVE_LIMIT` configurations or for a non-affine target, else Dinkelbach):
    ``(candidates for _rank, the methods used, whether Ctrl-C stopped it)``."""
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
            found.extend(space.exhaustive(top) if m == "exhaustive" else space.dinkelbach())
    except KeyboardInterrupt:
        return found, used, True
    return found, used, False


def best_sd(
    model_set: ModelSet, drafters: Sequence[str] | None = None, k_max: int = 100
) -> Configuration:
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


def _rank(found: list, top: int, ms: ModelSet) -> list[Configuration]:
    """The true top ``top``: equivalent configurations merged, each re-evaluated exactly by
    :class:`Cascade`, ordered by :func:`_order`.

    ``found`` holds ``(value, space, args)`` candidates whose ``value`` (the vectorised
    EWIF) is within rounding of the exact one; all candidates within 1e-9 relative of the
    ``top``-th best distinct configuration are re-evaluated, so ties are decided exactly.
    """
    merged: dict[tuple, tuple[float, _Space, tuple[str, ...], np.ndarray]] = {}
    for value, space, args in found:
        models, K = space._config(*args)
        key = _key(models, K, space.lenience)
        old = merged.get(key)
        if old is None:
            merged[key] = (value, space, models, K)
        else:  # the same configuration: keep the best value and the smallest lenience
            low = old[1] if old[1].lenience <= space.lenience else space
            merged[key] = (max(value, old[0]), low, models, K)
    items = list(merged.values())
    keep = _top_with_ties(np.array([v for v, *_ in items]), top) if items else []
    out = [items[i][1].evaluate(items[i][2], items[i][3]) for i in keep]
    out.sort(key=lambda c: _order(c, ms))
    return out[:top]


def _key(models: tuple[str, ...], K: np.ndarray, lenience: float) -> tuple:
    """Equivalence of configurations: the same canonical models and K, and the same lenience
    unless no drafter reviews another (then lenience changes nothing: alpha's target row is
    the same at every lenience)."""
    return (models, K.tobytes(), lenience if K[1:].any() else None)


def _order(c: Configuration, ms: ModelSet) -> tuple:
    """Ranking: higher EWIF first; ties broken by the smallest total budget ΣK, then the
    lexicographically smallest K (row by row), then the smaller lenience, then the models'
    positions in the set."""
    return (-c.ewif, int(c.K.sum()), c.K.tolist(), c.lenience, [ms.index(m) for m in c.models])


class _Block(NamedTuple):
    """Target-level summary of one block, one entry per budget ``b`` of its options.

    ``P = E[a^L]`` (whole block accepted), ``E = E[Σ_{i=1}^{L} a^i]`` (expected accepted
    tokens in it), ``C`` the drafters' expected cost of building it (Wald; the target's
    review pass is priced separately) and ``lengths[i, v] = P(L_(b_i) = v)``.
    """

    P: np.ndarray
    E: np.ndarray
    C: np.ndarray
    lengths: np.ndarray

    @property
    def mean(self) -> np.ndarray:
        """``E[L]`` per budget."""
        return self.lengths @ np.arange(self.lengths.shape[1], dtype=float)


class _Prepared(NamedTuple):
    """One assignment ``sigma`` of rows 2..n-1: the first block's options (row1 × k11,
    flattened) and the summaries of target blocks 2..n."""

    sigma: tuple
    rows1: list
    k_vals: list[tuple[int, ...]]
    first: _Block
    rest: list[_Block]


class _Space:
    """The configurations of one model list at one lenience, and their exact evaluation."""

    def __init__(
        self,
        ms: ModelSet,
        models: tuple[str, ...],
        lenience: float,
        spec: Mapping[Entry, BoundSpec],
        fill: str,
    ) -> None:
        self.models, self.lenience, self.fill = models, lenience, fill
        ix = np.asarray([ms.index(m) for m in models])
        self.order = tuple(int(i) for i in ix)
        self.alpha = ms.alpha[lenience][np.ix_(ix, ix)]
        self.cost = ms.cost[ix]
        self.cpt = ms.cost_per_token[ix]
        self.curves = None if ms.cost_curve is None else [ms.cost_curve[i] for i in ix]
        self.pass_cost = ms.pass_cost.select(ix)
        self.target_affine = self.pass_cost.affine_params(0)
        n = self.n = len(models) - 1
        for r, j in spec:
            if not (1 <= r <= j <= n):
                raise ValueError(
                    f"bounds entry k_{r}{j} is outside the upper triangle of a {n}x{n} K "
                    f"for models {list(models)}"
                )
        self.allowed: dict[tuple[int, int], tuple[int, ...]] = {}
        for r in range(n):  # 0-based reviewer
            for j in range(r + 1, n + 1):  # drafter model index
                vals = bound_values(f"bounds k_{r + 1}{j}", spec.get((r + 1, j), 0))
                if np.isnan(self.alpha[r, j]):
                    vals = (0,)
                self.allowed[r, j] = vals
        self.rowopts = [
            list(itertools.product(*(self.allowed[r, j] for j in range(r + 1, n + 1))))
            for r in range(n)
        ]
        self.size = int(np.prod([len(o) for o in self.rowopts], dtype=float))
        self._memo: dict = {}

    # -------------------------------------------------------------- sub-cascades
    def _block(self, j: int, rows: tuple | None, budgets: tuple[int, ...]) -> _Block:
        """Summary of target block ``j`` for every budget; ``rows`` are the K rows of models
        ``j..n-1`` (None when ``j = n``)."""
        a = float(self.alpha[0, j])
        b = np.asarray(budgets, dtype=np.int64)
        if rows is None or is_leaf(rows, 0):
            lengths = np.zeros((b.size, int(b.max()) + 1))
            lengths[np.arange(b.size), b] = 1.0
            C = b * float(self.pass_cost.at(j, 1))
        else:
            call = review_call(j, rows, self.alpha, self.pass_cost, self.fill, self._memo)
            lengths, calls = block_lengths(call.pmf, b, self.fill)
            C = calls * call.total_cost
        v = np.arange(lengths.shape[1])
        return _Block(lengths @ a ** v.astype(float), lengths @ _gsum(a, v), C, lengths)

    def _prepare(self, sigma: tuple) -> _Prepared:
        """Per assignment sigma of rows 2..n-1: block-1 options and blocks 2..n summaries."""
        n = self.n
        k_vals = [self.allowed[0, j] for j in range(1, n + 1)]
        rows1 = self.rowopts[1] if n >= 2 else [None]
        firsts = [
            self._block(1, None if row1 is None else (row1, *sigma), k_vals[0]) for row1 in rows1
        ]
        width = max(f.lengths.shape[1] for f in firsts)
        lengths = np.zeros((len(firsts) * len(k_vals[0]), width))
        for i, f in enumerate(firsts):
            lengths[i * len(k_vals[0]) : (i + 1) * len(k_vals[0]), : f.lengths.shape[1]] = f.lengths
        first = _Block(*(np.concatenate([getattr(f, x) for f in firsts]) for x in "PEC"), lengths)
        rest = [
            self._block(j, sigma[j - 2 :] if j < n else None, k_vals[j - 1])
            for j in range(2, n + 1)
        ]
        return _Prepared(sigma, list(rows1), k_vals, first, rest)

    def _config(self, sigma, row1, target_row) -> tuple[tuple[str, ...], np.ndarray]:
        n = self.n
        K = np.zeros((n, n), dtype=np.int64)
        K[0] = target_row
        if n >= 2:
            K[1, 1:] = row1
            for q, row in enumerate(sigma, start=2):
                K[q, q:] = row
        return _canonical(self.models, K)

    def evaluate(self, models: tuple[str, ...], K: np.ndarray) -> Configuration:
        ix = np.asarray([self.models.index(m) for m in models])
        alpha = self.alpha[np.ix_(ix, ix)]
        if self.curves is None:
            c = Cascade(alpha, self.cost[ix], K, self.cpt[ix], fill=self.fill)
        else:
            c = Cascade(alpha, None, K, fill=self.fill, cost_curve=[self.curves[i] for i in ix])
        return Configuration(models, c.K.copy(), self.lenience, c.ewif())

    def _sigmas(self):
        return itertools.product(*self.rowopts[2:]) if self.n >= 3 else [()]

    def _affine_blocks(self, prep: _Prepared) -> tuple[_Block, list[_Block]]:
        """Blocks whose ``C`` includes the target's per-position review cost ``s0·E[L]``
        (affine target ``c_0(m) = a0 + s0·m``: the review costs ``c_0(1) + s0·Σ_j E[L_j]``)."""
        s0 = self.target_affine[1]
        first, rest = prep.first, prep.rest
        return (
            first._replace(C=first.C + s0 * first.mean),
            [b._replace(C=b.C + s0 * b.mean) for b in rest],
        )

    def _review_cost(self, prep: _Prepared, shape: tuple[int, ...]) -> np.ndarray:
        """``E[c_0(1 + Σ_j L_j)]`` for every configuration of ``prep``, exactly, for any c_0.

        Backward over the target blocks: ``G_(n+1)(s) = c_0(1 + s)``, ``G_j[b_j, …, s] =
        Σ_v P(L_j(b_j) = v) G_(j+1)[…, s + v]``; the first block's length pmfs (one row per
        (row1, k11) option) then contract against ``G_2`` as one matrix product.
        """
        first, rest = prep.first, prep.rest
        total = sum(b.lengths.shape[1] - 1 for b in (first, *rest))
        G = self.pass_cost.at(0, np.arange(1, total + 2)).astype(float)
        for blk in reversed(rest):
            windows = np.lib.stride_tricks.sliding_window_view(G, blk.lengths.shape[1], axis=-1)
            G = np.einsum("bv,...sv->b...s", blk.lengths, windows)
        return (first.lengths @ G.reshape(-1, G.shape[-1]).T).reshape(shape)

    def _keep(self, prep: _Prepared, shape: tuple[int, ...]) -> np.ndarray:
        """True for the configurations that stand for their equivalence class: a non-empty
        target row, and every drafter the configuration never reaches has its K row at the
        smallest allowed values (so equivalent configurations are counted once). "Reaches"
        is :func:`ewif.kernel.review_call.drafters_reached`, evaluated here for every configuration
        of ``prep`` at once (boolean arrays over the first block's options)."""
        n, nd = self.n, len(shape)
        k_vals, sigma = prep.k_vals, prep.sigma
        n11 = len(k_vals[0])

        def along_first(v: np.ndarray) -> np.ndarray:  # one value per (row1, k11) option
            return np.asarray(v).reshape((-1,) + (1,) * (nd - 1))

        def target(j: int) -> np.ndarray:
            if j == 1:
                return along_first(np.tile(np.asarray(k_vals[0]) > 0, len(prep.rows1)))
            return _axis(np.asarray(k_vals[j - 1]) > 0, j - 1, nd)

        row1 = np.repeat(np.asarray(prep.rows1, dtype=np.int64), n11, axis=0) if n >= 2 else None

        def budget(q: int, j: int):  # k of drafter j when model q >= 1 reviews
            return along_first(row1[:, j - 2]) if q == 1 else sigma[q - 2][j - q - 1]

        used, reached = {}, {}
        for j in range(1, n + 1):
            u = target(j)
            for q in range(1, j):
                u = u | (reached[q] & (np.asarray(budget(q, j)) > 0))
            used[j] = u
            if j < n:
                nonzero = along_first(row1.any(axis=1)) if j == 1 else any(sigma[j - 2])
                reached[j] = u & nonzero
        keep = ~_empty_mask(k_vals, shape)
        for q in range(1, n):
            lowest = tuple(min(self.allowed[q, j]) for j in range(q + 1, n + 1))
            at_min = along_first((row1 == lowest).all(axis=1)) if q == 1 else sigma[q - 2] == lowest
            keep = keep & (used[q] | at_min)
        return np.broadcast_to(keep, shape)

    # -------------------------------------------------------------- strategies
    def exhaustive(self, top: int) -> list:
        """Every configuration's exact EWIF; returns the candidates for the top ``top``
        (all within 1e-9 relative of the ``top``-th best, so ties are all kept)."""
        out = []
        for sigma in self._sigmas():
            prep = self._prepare(sigma)
            first, rest, k_vals = prep.first, prep.rest, prep.k_vals
            shape = (first.P.size, *tuple(len(v) for v in k_vals[1:]))
            m = len(rest)
            N = np.zeros((1,) * m)  # E_2 + P_2 (E_3 + P_3 (…)) over the target budgets k_12..k_1n
            for d in reversed(range(m)):
                N = _axis(rest[d].E, d, m) + _axis(rest[d].P, d, m) * N
            N = np.broadcast_to(N, shape[1:])
            tokens = 1.0 + _expand(first.E, m) + _expand(first.P, m) * N[None, ...]
            if self.target_affine is None:
                cost = _expand(first.C, m) + self._review_cost(prep, shape)
                blocks = rest
            else:
                first_a, blocks = self._affine_blocks(prep)
                cost = self.pass_cost.unit + _expand(first_a.C, m)
            for d, blk in enumerate(blocks):
                cost = cost + _axis(blk.C, d + 1, len(shape))
            ratio = tokens * self.pass_cost.unit / cost
            ratio = np.where(self._keep(prep, shape), ratio, -np.inf).reshape(-1)
            for flat in _top_with_ties(ratio, top):
                pos = np.unravel_index(flat, shape)
                row_i, k11_i = divmod(int(pos[0]), len(k_vals[0]))
                target_row = [k_vals[0][k11_i]] + [
                    k_vals[d][int(p)] for d, p in enumerate(pos[1:], start=1)
                ]
                out.append((float(ratio[flat]), self, (sigma, prep.rows1[row_i], target_row)))
        kept = _top_with_ties(np.array([v for v, _, _ in out]), top) if out else []
        return [out[i] for i in kept]

    def dinkelbach(self) -> list:
        if self.target_affine is None:
            raise ValueError(_DINKELBACH_CURVE)
        unit = self.pass_cost.unit
        prepared = []
        for sigma in self._sigmas():
            prep = self._prepare(sigma)
            first, rest = self._affine_blocks(prep)
            prepared.append((prep, first, [np.stack([b.P, b.E, b.C]) for b in rest]))
        lam = 1.0 / unit  # ratio N/D of the empty draft (= autoregressive)
        best = None
        while True:
            value, arg = -np.inf, None
            for prep, first, rest in prepared:
                v, choice = envelope.query(envelope.lines(rest, lam), first.P)
                total = 1.0 - lam * unit + first.E - lam * first.C + v
                i = int(np.argmax(total))
                if total[i] > value:
                    value, arg = total[i], (prep, first, rest, i, choice[i])
            if value <= 1e-12 * lam:
                break
            prep, first, rest, i, path = arg
            tokens, cost, p = 1.0 + first.E[i], unit + first.C[i], first.P[i]
            for blk, b in zip(rest, path, strict=True):
                P, E, C = blk[:, b]
                tokens, cost, p = tokens + p * E, cost + C, p * P
            new = tokens / cost
            if new <= lam * (1.0 + 1e-15):
                break
            lam = new
            k_vals = prep.k_vals
            row_i, k11_i = divmod(i, len(k_vals[0]))
            target_row = [k_vals[0][k11_i]] + [k_vals[d][b] for d, b in enumerate(path, start=1)]
            best = (prep.sigma, prep.rows1[row_i], target_row)
        if best is None or not any(best[2]):
            return []
        return [(lam * unit, self, best)]


_DINKELBACH_CURVE = (
    "method='dinkelbach' needs an affine target pass cost: with a non-affine target curve "
    "c_0(m) the review cost E[c_0(1 + sum_j L_j)] is not separable across the target's "
    "blocks, so Dinkelbach's block-by-block maximum is not exact; use method='exhaustive' "
    "(or 'auto', which picks it)"
)


def _top_with_ties(values: np.ndarray, top: int) -> np.ndarray:
    """Indices of the finite ``values`` at least as large as the ``top``-th largest, less a
    1e-9 relative margin (so every possible tie, up to rounding, is kept)."""
    finite = np.isfinite(values)
    count = int(finite.sum())
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    k = min(top, count)
    kth = np.partition(values[finite], count - k)[count - k]
    return np.flatnonzero(finite & (values >= kth - 1e-9 * abs(kth)))


def _expand(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((-1,) + (1,) * ndim)


def _axis(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def _empty_mask(k_vals, shape) -> np.ndarray:
    """True where every target budget is zero (an empty draft: not a cascade)."""
    mask = np.ones(shape, dtype=bool)
    k11 = np.asarray(k_vals[0])
    rows = shape[0] // len(k11)
    mask &= np.tile(k11 == 0, rows).reshape((-1,) + (1,) * (len(shape) - 1))
    for d in range(1, len(shape)):
        mask &= _axis(np.asarray(k_vals[d]) == 0, d, len(shape))
    return mask


def _gsum(a: float, b: np.ndarray) -> np.ndarray:
    """Σ_{i=1}^{b} a^i for integer arrays b >= 0, by cumulative sums (no cancellation)."""
    b = np.asarray(b)
    top = int(b.max()) if b.size else 0
    sums = np.concatenate([[0.0], np.cumsum(a ** np.arange(1, top + 1, dtype=float))])
    return sums[b]


def _canonical(models: tuple[str, ...], K: np.ndarray) -> tuple[tuple[str, ...], np.ndarray]:
    """Drop the drafters a configuration never reaches (zero budgets); returns (models, K)."""
    ix = np.asarray(sorted({0} | drafters_reached(0, rows_of(K))))
    return tuple(models[i] for i in ix), K[np.ix_(ix[:-1], ix[1:] - 1)].copy()
