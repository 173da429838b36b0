"""Find the best cascade: model subset, budgets K and lenience, exactly.

The objective is the EWIF of :class:`ewif.cascade.Cascade` (same semantics). Two exact
strategies share one decomposition of a target step:

* **Memoised sub-cascades.** A model's K row is the same wherever it reviews, so the
  tokens PGF ``R_r`` of one review call of drafter ``r`` depends only on the rows of models
  ``r..n−1``; each is computed once per lenience (:func:`ewif.cascade.stopped_sum`,
  :func:`ewif.cascade.review`) and reused by every configuration that contains it.
* **Block summaries.** At the target the draft is a sequence of independent blocks; the
  target step only needs, per block ``j`` and budget ``b``, four numbers: ``P_j = E[a^L]``
  (whole block accepted), ``E_j = E[Σ_{i=1}^{L} a^i]`` (expected accepted tokens in it),
  ``E[L]`` and the block's expected cost ``C_j`` (Wald). For a ``tokens`` block with renewal
  sequence ``u`` of ``R_j`` and any ``f``: ``E[f(L_b)] = Σ_{s<b} u(s) E[f(s + R_j)] −
  Σ_{1≤v<b} u(v) f(v)`` — one cumulative sum gives every budget at once. Then
  ``E[tokens] = 1 + E_1 + P_1 (E_2 + P_2 (E_3 + …))`` and ``E[cost] = c_0 + cpt_0 +
  Σ_j (C_j + cpt_0 E[L_j])``.

``"exhaustive"`` evaluates these two formulas for every configuration with numpy
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

from ewif import _validate
from ewif._numerics import pmf_power
from ewif.cascade import FILLS, Cascade, review, stopped_sum
from ewif.io import ModelSet

Entry = tuple[int, int]  # (r, j) 1-based as in k_rj
BoundSpec = int | tuple[int, int] | Sequence[int]

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
    """The optimum and a ranked table (best first; equivalent configurations merged).

    ``n_configurations`` counts the configurations of the search space (all subsets and
    leniences); ``method`` is ``"exhaustive"`` or ``"dinkelbach"``; ``interrupted`` is True
    when Ctrl-C stopped the search (the result is then the best of what was searched).
    """

    best: Configuration
    table: list[Configuration]
    n_configurations: int
    method: str
    seconds: float
    interrupted: bool = False
    model_set: ModelSet | None = field(default=None, repr=False)
    fill: str = "tokens"

    def cascade(self, config: Configuration | None = None) -> Cascade:
        """The :class:`Cascade` of ``config`` (default: the best)."""
        c = self.best if config is None else config
        return Cascade.from_model_set(self.model_set, c.models, c.K, c.lenience, fill=self.fill)


def paper_bounds(k_max: int = 30, mag_block: int = 10) -> dict[Entry, BoundSpec]:
    """The paper's search space for (target, BASE, SMALL, MaG): ``k11, k12, k22 ∈ 1..k_max``
    and every MaG budget ``k13 = k23 = k33 = mag_block`` (Table 5 / Appendix B)."""
    k_max = _validate.count("k_max", k_max, minimum=1)
    mag_block = _validate.count("mag_block", mag_block, minimum=0)
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
    k_max = _validate.count("k_max", 30 if space == "paper" and k_max is None else
                            12 if k_max is None else k_max, minimum=1)
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


def as_model_set(
    source: ModelSet | Mapping[float, object] | object,
    cost: object | None = None,
    cost_per_token: object | None = None,
    names: Sequence[str] | None = None,
) -> ModelSet:
    """A :class:`ModelSet` from a model set, or from alpha (matrix or lenience → matrix) + costs."""
    if isinstance(source, ModelSet):
        return source
    if cost is None:
        raise ValueError("cost is required when alpha is given as a matrix")
    raw = source if isinstance(source, Mapping) else {1.0: source}
    alpha = {float(k): np.array(v, dtype=float) for k, v in raw.items()}
    n1 = next(iter(alpha.values())).shape[0]
    cost = np.asarray(cost, dtype=float)
    cpt = np.zeros(n1) if cost_per_token is None else np.asarray(cost_per_token, dtype=float)
    names = tuple(names) if names is not None else ("target", *tuple(f"d{i}" for i in range(1, n1)))
    return ModelSet(models=names, cost=cost, cost_per_token=cpt, alpha=alpha)


def optimize(
    source: ModelSet | Mapping[float, object] | object,
    *,
    cost: object | None = None,
    cost_per_token: object | None = None,
    candidates: Sequence[str] | None = None,
    bounds: tuple[int, int] | Mapping[Entry, BoundSpec] = (1, 30),
    leniences: Iterable[float] | None = None,
    subsets: bool | None = None,
    fill: str = "tokens",
    method: str = "auto",
    top: int = 10,
    progress: bool = False,
) -> OptimizeResult:
    """Search model subsets, K and lenience for the highest exact EWIF.

    Parameters
    ----------
    source : a :class:`ModelSet`, or alpha (one matrix, or a mapping lenience → matrix)
        together with ``cost`` (and optionally ``cost_per_token``).
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
        configurations per search, else Dinkelbach).
    top : rows of the ranked table.

    Returns an :class:`OptimizeResult`. Raises ``ValueError`` for bad arguments or when no
    configuration of the space is valid.
    """
    ms = as_model_set(source, cost, cost_per_token)
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
    if method not in ("auto", "exhaustive", "dinkelbach"):
        raise ValueError(f"method must be 'auto', 'exhaustive' or 'dinkelbach', got {method!r}")
    top = _validate.count("top", top, minimum=1)
    cands = tuple(ms.models if candidates is None else candidates)
    idx = [ms.index(m) for m in cands]
    if idx[0] != 0 or len(cands) < 2 or sorted(set(idx)) != idx:
        raise ValueError(
            f"candidates must start with the target {ms.models[0]!r}, list at least one drafter "
            f"and follow the set's order {list(ms.models)}; got {list(cands)}"
        )
    lens = ms.leniences if leniences is None else tuple(float(x) for x in leniences)
    for x in lens:
        if x not in ms.alpha:
            raise ValueError(
                f"lenience {x:g} is not in the model set; available: "
                f"{', '.join(f'{v:g}' for v in ms.leniences)}"
            )
    uniform = not isinstance(bounds, Mapping)
    if subsets is None:
        subsets = uniform
    if subsets and not uniform:
        raise ValueError("subsets=True needs bounds=(lo, hi); a mapping describes one cascade")
    if uniform:
        lo, hi = (_validate.count("bounds[0]", bounds[0]), _validate.count("bounds[1]", bounds[1]))
        if lo > hi:
            raise ValueError(f"bounds must satisfy lo <= hi, got {bounds!r}")
    drafters = cands[1:]
    if subsets:
        groups = [
            (cands[0], *s)
            for size in range(1, len(drafters) + 1)
            for s in itertools.combinations(drafters, size)
        ]
    else:
        groups = [cands]
    searches = []
    for models in groups:
        n = len(models) - 1
        if uniform:
            spec = {(r, j): (lo, hi) for r in range(1, n + 1) for j in range(r, n + 1)}
        else:
            spec = dict(bounds)
        for len_ in lens:
            searches.append(_Space(ms, models, len_, spec, fill))
    started = time.perf_counter()
    found: list = []
    total = sum(s.size for s in searches)
    interrupted = False
    used_methods = set()
    try:
        iterator = searches
        if progress:
            from tqdm import tqdm

            iterator = tqdm(searches, desc="csd optimize", unit="search")
        for space in iterator:
            if space.size == 0:
                continue
            m = method
            if m == "auto":
                m = "exhaustive" if space.size <= _EXHAUSTIVE_LIMIT else "dinkelbach"
            used_methods.add(m)
            found.extend(space.exhaustive(top) if m == "exhaustive" else space.dinkelbach())
    except KeyboardInterrupt:
        interrupted = True
    table = _rank(found, top)
    if not table:
        raise ValueError("no valid configuration in the search space (every cascade was empty)")
    return OptimizeResult(
        best=table[0],
        table=table,
        n_configurations=total,
        method="+".join(sorted(used_methods)),
        seconds=time.perf_counter() - started,
        interrupted=interrupted,
        model_set=ms,
        fill=fill,
    )


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


def _rank(found: list, top: int) -> list[Configuration]:
    """Best first, equivalent configurations merged, re-evaluated exactly by :class:`Cascade`."""
    seen, out = set(), []
    for _, space, args in sorted(found, key=lambda t: -t[0]):
        models, K = space._config(*args)
        key = (models, K.tobytes(), space.lenience)
        if key in seen:
            continue
        seen.add(key)
        out.append(space.evaluate(models, K))
        if len(out) == top:
            break
    out.sort(key=lambda c: -c.ewif)
    return out


def _values(name: str, spec: BoundSpec) -> tuple[int, ...]:
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return (_validate.count(name, spec),)
    spec = tuple(spec)
    if len(spec) == 2 and not isinstance(spec, list):
        lo, hi = (_validate.count(name, spec[0]), _validate.count(name, spec[1]))
        if lo > hi:
            raise ValueError(f"{name} range must satisfy lo <= hi, got {spec!r}")
        return tuple(range(lo, hi + 1))
    vals = tuple(sorted({_validate.count(name, v) for v in spec}))
    if not vals:
        raise ValueError(f"{name} must allow at least one value")
    return vals


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
        self.alpha = ms.alpha[lenience][np.ix_(ix, ix)]
        self.cost = ms.cost[ix]
        self.cpt = ms.cost_per_token[ix]
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
                vals = _values(f"bounds k_{r + 1}{j}", spec.get((r + 1, j), 0))
                if np.isnan(self.alpha[r, j]):
                    vals = (0,)
                self.allowed[r, j] = vals
        self.rowopts = [
            list(itertools.product(*(self.allowed[r, j] for j in range(r + 1, n + 1))))
            for r in range(n)
        ]
        self.size = int(np.prod([len(o) for o in self.rowopts], dtype=float))
        self._memo: dict[tuple, tuple[np.ndarray, float]] = {}

    # -------------------------------------------------------------- sub-cascades
    def _call(self, r: int, rows: tuple) -> tuple[np.ndarray, float]:
        """(tokens pmf, expected cost) of one review call by model r; rows = rows of r..n-1."""
        key = (r, rows)
        if key in self._memo:
            return self._memo[key]
        n, blocks, cost, mean = self.n, [], 0.0, 0.0
        for j, b in zip(range(r + 1, n + 1), rows[0], strict=True):
            if b == 0:
                continue
            if j == n or not any(rows[j - r]):
                length = np.zeros(b + 1)
                length[b] = 1.0
                cost += b * (self.cost[j] + self.cpt[j])
            else:
                pmf, c = self._call(j, rows[j - r :])
                if self.fill == "tokens":
                    length, calls = stopped_sum(pmf, b)
                else:
                    length, calls = pmf_power(pmf, b), float(b)
                cost += calls * c
            mean += float(np.arange(length.size) @ length)
            blocks.append((float(self.alpha[r, j]), length))
        pmf, _ = review(blocks)
        cost += self.cost[r] + self.cpt[r] * (mean + 1.0)
        self._memo[key] = (pmf, cost)
        return pmf, cost

    def _block(self, j: int, rows: tuple | None, budgets: tuple[int, ...]) -> np.ndarray:
        """Target-level summaries (4, len(budgets)): P, E, C (incl. cpt_0·E[L]) per budget.

        ``rows`` are the rows of models j..n-1 (None or all-zero row: j is a leaf).
        """
        a = float(self.alpha[0, j])
        b = np.asarray(budgets)
        if rows is None or not any(rows[0]):
            P = a ** b.astype(float)
            E = _gsum(a, b)
            C = b * (self.cost[j] + self.cpt[j]) + self.cpt[0] * b
            return np.stack([P, E, C])
        pmf, call_cost = self._call(j, rows)
        t = np.arange(pmf.size)
        Ra, Eg, Er = float(pmf @ a**t), float(pmf @ _gsum(a, t)), float(pmf @ t)
        bmax = int(b.max())
        if self.fill == "rounds":
            # L_k = sum of k calls: E[a^L] = R(a)^k, E[g(L_k)] = E[g(R)] Σ_{i<k} R(a)^i
            P = Ra ** b.astype(float)
            geo = np.concatenate([[0.0], np.cumsum(Ra ** np.arange(bmax, dtype=float))])
            E = Eg * geo[b]
            L, N = b * Er, b.astype(float)
        else:
            u = np.zeros(max(bmax, 1))
            u[0] = 1.0
            r = pmf[1:bmax]
            for s in range(1, bmax):
                m = min(s, r.size)
                u[s] = r[:m] @ u[s - 1 :: -1][:m]
            s = np.arange(u.size)
            as_ = a ** s.astype(float)
            g = _gsum(a, s)

            def expect(phi: np.ndarray, f: np.ndarray) -> np.ndarray:
                first = np.concatenate([[0.0], np.cumsum(u * phi)])  # Σ_{s<b}
                second = np.concatenate([[0.0], np.cumsum(u * f)]) - 1.0 * f[0]  # Σ_{1≤v<b}
                second[0] = 0.0
                return first[b] - second[b]

            P = np.where(b == 0, 1.0, expect(as_ * Ra, as_))
            E = expect(g + as_ * Eg, g)
            L = expect(s + Er, s.astype(float))
            N = np.concatenate([[0.0], np.cumsum(u)])[b]
        C = N * call_cost + self.cpt[0] * L
        return np.stack([P, E, C])

    def _prepare(self, sigma: tuple):
        """Per assignment sigma of rows 2..n-1: block-1 options and blocks 2..n summaries."""
        n = self.n
        first = []  # (row1, k11 values) summaries
        k_vals = [self.allowed[0, j] for j in range(1, n + 1)]
        rows1 = self.rowopts[1] if n >= 2 else [None]
        for row1 in rows1:
            rows = None if row1 is None else (row1, *sigma)
            first.append(self._block(1, rows, k_vals[0]))
        first = np.stack(first)  # (|row1|, 3, |k11|)
        rest = []
        for j in range(2, n + 1):
            rows = sigma[j - 2 :] if j < n else None
            rest.append(self._block(j, rows, k_vals[j - 1]))
        return rows1, first, rest, k_vals

    def _config(self, sigma, row1, target_row) -> Configuration:
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
        c = Cascade(self.alpha[np.ix_(ix, ix)], self.cost[ix], K, self.cpt[ix], fill=self.fill)
        return Configuration(models, c.K.copy(), self.lenience, c.ewif())

    def _sigmas(self):
        return itertools.product(*self.rowopts[2:]) if self.n >= 3 else [()]

    def _ar(self) -> float:
        return float(self.cost[0] + self.cpt[0])

    # -------------------------------------------------------------- strategies
    def exhaustive(self, top: int) -> list[Configuration]:
        out = []
        for sigma in self._sigmas():
            rows1, first, rest, k_vals = self._prepare(sigma)
            P1, E1, C1 = (first[:, i, :].reshape(-1) for i in range(3))
            shape = (P1.size, *tuple(len(v) for v in k_vals[1:]))
            m = len(rest)
            N = np.zeros((1,) * m)  # E_2 + P_2 (E_3 + P_3 (…)) over the target budgets k_12..k_1n
            for d in reversed(range(m)):
                P, E, _ = rest[d]
                N = _axis(E, d, m) + _axis(P, d, m) * N
            N = np.broadcast_to(N, shape[1:])
            tokens = 1.0 + _expand(E1, m) + _expand(P1, m) * N[None, ...]
            cost = np.full(shape, self._ar()) + C1.reshape((-1,) + (1,) * N.ndim)
            for d, blk in enumerate(rest):
                cost = cost + _axis(blk[2], d + 1, len(shape))
            ratio = tokens * self._ar() / cost
            empty = _empty_mask(k_vals, shape)
            ratio = np.where(empty, -np.inf, ratio).reshape(-1)
            k = min(top * 4, ratio.size)
            best = np.argpartition(-ratio, k - 1)[:k]
            best = best[np.argsort(-ratio[best])]
            for flat in best:
                if not np.isfinite(ratio[flat]):
                    continue
                pos = np.unravel_index(flat, shape)
                row_i, k11_i = divmod(int(pos[0]), len(k_vals[0]))
                target_row = [k_vals[0][k11_i]] + [
                    k_vals[d][int(p)] for d, p in enumerate(pos[1:], start=1)
                ]
                out.append((float(ratio[flat]), self, (sigma, rows1[row_i], target_row)))
        out.sort(key=lambda t: -t[0])
        return out[: top * 4]

    def dinkelbach(self) -> list[Configuration]:
        prepared = [(sigma, *self._prepare(sigma)) for sigma in self._sigmas()]
        lam = 1.0 / self._ar()  # ratio N/D of the empty draft (= autoregressive)
        best = None
        while True:
            value, arg = -np.inf, None
            for sigma, rows1, first, rest, k_vals in prepared:
                hull = _lines(rest, lam)
                P1, E1, C1 = (first[:, i, :].reshape(-1) for i in range(3))
                v, choice = _query(hull, P1)
                total = 1.0 - lam * self._ar() + E1 - lam * C1 + v
                i = int(np.argmax(total))
                if total[i] > value:
                    value, arg = total[i], (sigma, rows1, k_vals, i, choice[i], first, rest)
            if value <= 1e-12 * lam:
                break
            sigma, rows1, k_vals, i, path, first, rest = arg
            row_i, k11_i = divmod(i, len(k_vals[0]))
            P1, E1, C1 = first[row_i, :, k11_i]
            tokens, cost, p = 1.0 + E1, self._ar() + C1, P1
            for blk, b in zip(rest, path, strict=True):
                P, E, C = blk[:, b]
                tokens, cost, p = tokens + p * E, cost + C, p * P
            new = tokens / cost
            if new <= lam * (1.0 + 1e-15):
                break
            lam = new
            target_row = [k_vals[0][k11_i]] + [k_vals[d][b] for d, b in enumerate(path, start=1)]
            best = (sigma, rows1[row_i], target_row)
        if best is None or not any(best[2]):
            return []
        return [(lam * self._ar(), self, best)]


def _lines(rest: list[np.ndarray], lam: float):
    """Upper envelope of Φ_2 as (slopes, intercepts, choices), built from the last block back."""
    m, c, ch = np.zeros(1), np.zeros(1), np.zeros((1, 0), dtype=np.int64)
    for blk in reversed(rest):
        P, E, C = blk
        nb = P.size
        m2 = (E[:, None] + P[:, None] * m[None, :]).reshape(-1)
        c2 = (-lam * C[:, None] + c[None, :]).reshape(-1)
        ch2 = np.concatenate(
            [np.repeat(np.arange(nb), m.size)[:, None], np.tile(ch, (nb, 1))], axis=1
        )
        keep = _hull(m2, c2)
        m, c, ch = m2[keep], c2[keep], ch2[keep]
    return m, c, ch


def _hull(m: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Indices of lines ``y = m x + c`` that contain a maximiser for every ``x ∈ [0, 1]``.

    Convex-hull trick: sort by slope (ties keep the larger intercept); a line between two
    others is dropped when its neighbours cross before it overtakes the left one; a line
    that only overtakes the current top beyond ``x = 1`` is never a maximiser on [0, 1].
    """
    order = np.lexsort((-c, m))
    stack: list[int] = []
    for i in order:
        if stack and m[stack[-1]] == m[i]:
            continue
        while stack:
            j = stack[-1]
            if c[j] <= c[i]:  # m[j] < m[i]: i is at least as high on all x >= 0
                stack.pop()
                continue
            if len(stack) >= 2:
                k = stack[-2]
                if (c[k] - c[i]) * (m[j] - m[k]) <= (c[k] - c[j]) * (m[i] - m[k]):
                    stack.pop()
                    continue
            break
        if stack and (c[stack[-1]] - c[i]) >= (m[i] - m[stack[-1]]):
            continue  # i overtakes the top only at x >= 1
        stack.append(i)
    return np.asarray(stack, dtype=np.int64)


def _query(hull, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """max over envelope lines at points p, and the choice path of the maximising line."""
    m, c, ch = hull
    vals = p[:, None] * m[None, :] + c[None, :] if m.size <= 64 else None
    if vals is None:  # large envelope: chunk to bound memory
        best = np.empty(p.size, dtype=np.int64)
        for s in range(0, p.size, 4096):
            best[s : s + 4096] = np.argmax(p[s : s + 4096, None] * m + c, axis=1)
    else:
        best = np.argmax(vals, axis=1)
    return p * m[best] + c[best], ch[best]


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
    n = K.shape[0]
    used, stack = {0}, [0]
    while stack:
        r = stack.pop()
        for j in range(r + 1, n + 1):
            if K[r, j - 1] and j not in used:
                used.add(j)
                if j < n and K[j].any():
                    stack.append(j)
    ix = np.asarray(sorted(used))
    return tuple(models[i] for i in ix), K[np.ix_(ix[:-1], ix[1:] - 1)].copy()


@dataclass(frozen=True)
class Landscape:
    """EWIF over two K entries of a configuration, the others held at their values.

    ``grid[i, j]`` is the exact EWIF with ``k_{entries[0]} = x[i]`` and
    ``k_{entries[1]} = y[j]`` (NaN where the configuration would be invalid).
    """

    config: Configuration
    entries: tuple[Entry, Entry]
    x: np.ndarray
    y: np.ndarray
    grid: np.ndarray


def landscape(
    result: OptimizeResult,
    entries: tuple[Entry, Entry] | None = None,
    k_max: int = 30,
    config: Configuration | None = None,
) -> Landscape:
    """EWIF grid around ``config`` (default: the best) over two K entries ``(r, j)`` (1-based).

    By default the two *most important* entries are used: those whose one-at-a-time
    variation over ``1..k_max`` (others fixed) changes the EWIF most.
    """
    cfg = result.best if config is None else config
    k_max = _validate.count("k_max", k_max, minimum=1)
    n = cfg.K.shape[0]
    free = [(r, j) for r in range(1, n + 1) for j in range(r, n + 1) if cfg.K[r - 1, j - 1] > 0]
    if entries is None:
        if len(free) < 2:
            free = [(r, j) for r in range(1, n + 1) for j in range(r, n + 1)]
        spread = {}
        for e in free:
            vals = [_ewif_at(result, cfg, {e: v}) for v in range(1, k_max + 1)]
            vals = np.asarray(vals, dtype=float)
            spread[e] = float(np.nanmax(vals) - np.nanmin(vals)) if np.isfinite(vals).any() else 0
        if len(spread) < 2:
            raise ValueError(f"a {n}x{n} K has fewer than two entries to vary")
        ranked = sorted(spread, key=lambda e: -spread[e])
        entries = (ranked[0], ranked[1])
    for r, j in entries:
        if not (1 <= r <= j <= n):
            raise ValueError(f"landscape entry k_{r}{j} is outside the upper triangle of K")
    x = np.arange(1, k_max + 1)
    grid = np.array(
        [[_ewif_at(result, cfg, {entries[0]: a, entries[1]: b}) for b in x] for a in x]
    )
    return Landscape(cfg, (tuple(entries[0]), tuple(entries[1])), x, x.copy(), grid)


def _ewif_at(result: OptimizeResult, cfg: Configuration, changes: dict[Entry, int]) -> float:
    K = cfg.K.copy()
    for (r, j), v in changes.items():
        K[r - 1, j - 1] = v
    try:
        return Cascade.from_model_set(
            result.model_set, cfg.models, K, cfg.lenience, fill=result.fill
        ).ewif()
    except ValueError:
        return float("nan")
