"""One sub-space of the optimizer's search (a model list at one lenience) and its block summaries.

Both exact strategies (:mod:`ewif.search.exhaustive`, :mod:`ewif.search.dinkelbach`)
evaluate a sub-space from the summaries of its target step's blocks:

* **Memoised sub-cascades.** A model's K row is the same wherever it reviews, so one
  review call of drafter ``r`` depends only on the rows of models ``r..n−1``; each is
  computed once per lenience by the kernel :func:`ewif.kernel.review_call.review_call` (the one
  :class:`~ewif.kernel.cascade.Cascade` uses) and reused by every configuration that contains it.
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
non-affine target curve it couples the blocks (:func:`ewif.search.exhaustive.review_cost`).

The configurations of a sub-space are enumerated as an assignment ``sigma`` of the K rows of
models 2..n−1, then the first drafter's row with the target's first budget (flattened into
one axis), then the target's other budgets: :meth:`SubSpace.config_of` turns such a position
back into ``(models, K)``, the drafters it never reaches dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from ewif.base.configuration import EvaluatedConfiguration
from ewif.files.model_set import ModelSet
from ewif.kernel.budgets import drafters_reached, is_leaf, rows_of
from ewif.kernel.cascade import Cascade
from ewif.kernel.review_call import block_lengths, review_call
from ewif.search.space import BoundSpec, Entry, bound_values


class Block(NamedTuple):
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


class Prepared(NamedTuple):
    """One assignment ``sigma`` of rows 2..n-1: the first block's options (row1 × k11,
    flattened) and the summaries of target blocks 2..n."""

    sigma: tuple
    rows1: list
    k_vals: list[tuple[int, ...]]
    first: Block
    rest: list[Block]


class SubSpace:
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

    def block(self, j: int, rows: tuple | None, budgets: tuple[int, ...]) -> Block:
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
        return Block(lengths @ a ** v.astype(float), lengths @ _gsum(a, v), C, lengths)

    def prepare(self, sigma: tuple) -> Prepared:
        """Per assignment sigma of rows 2..n-1: block-1 options and blocks 2..n summaries."""
        n = self.n
        k_vals = [self.allowed[0, j] for j in range(1, n + 1)]
        rows1 = self.rowopts[1] if n >= 2 else [None]
        firsts = [
            self.block(1, None if row1 is None else (row1, *sigma), k_vals[0]) for row1 in rows1
        ]
        width = max(f.lengths.shape[1] for f in firsts)
        lengths = np.zeros((len(firsts) * len(k_vals[0]), width))
        for i, f in enumerate(firsts):
            lengths[i * len(k_vals[0]) : (i + 1) * len(k_vals[0]), : f.lengths.shape[1]] = f.lengths
        first = Block(*(np.concatenate([getattr(f, x) for f in firsts]) for x in "PEC"), lengths)
        rest = [
            self.block(j, sigma[j - 2 :] if j < n else None, k_vals[j - 1]) for j in range(2, n + 1)
        ]
        return Prepared(sigma, list(rows1), k_vals, first, rest)

    def config_of(self, sigma, row1, target_row) -> tuple[tuple[str, ...], np.ndarray]:
        n = self.n
        K = np.zeros((n, n), dtype=np.int64)
        K[0] = target_row
        if n >= 2:
            K[1, 1:] = row1
            for q, row in enumerate(sigma, start=2):
                K[q, q:] = row
        return _canonical(self.models, K)

    def evaluate(self, models: tuple[str, ...], K: np.ndarray) -> EvaluatedConfiguration:
        ix = np.asarray([self.models.index(m) for m in models])
        alpha = self.alpha[np.ix_(ix, ix)]
        if self.curves is None:
            c = Cascade(alpha, self.cost[ix], K, self.cpt[ix], fill=self.fill)
        else:
            c = Cascade(alpha, None, K, fill=self.fill, cost_curve=[self.curves[i] for i in ix])
        return EvaluatedConfiguration(models, c.K.copy(), self.lenience, ewif=c.ewif())

    def sigmas(self):
        return itertools.product(*self.rowopts[2:]) if self.n >= 3 else [()]

    def affine_blocks(self, prep: Prepared) -> tuple[Block, list[Block]]:
        """Blocks whose ``C`` includes the target's per-position review cost ``s0·E[L]``
        (affine target ``c_0(m) = a0 + s0·m``: the review costs ``c_0(1) + s0·Σ_j E[L_j]``)."""
        s0 = self.target_affine[1]
        first, rest = prep.first, prep.rest
        return (
            first._replace(C=first.C + s0 * first.mean),
            [b._replace(C=b.C + s0 * b.mean) for b in rest],
        )


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
