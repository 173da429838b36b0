"""Exact evaluation of any Algorithm-1 cascade under the Bernoulli acceptance model.

The paper gives closed forms only for special cases (Cor. 4.2: one drafter; Thm. 4.3: two
drafters with ``n`` fixed rounds; Thm. 4.5: one leaf drafter per position). :class:`Cascade`
evaluates every configuration of Algorithm 1 exactly: the full distribution of the tokens
one target step yields (its PGF, by dynamic programming over stopped sums — no sampling, no
truncation), and the expected cost of that step (Wald's identity).

Semantics (the contract shared with ``simulate`` and ``realrun``, stated only here)
----------------------------------------------------------------------------------
* Models ``0..n``, largest first: 0 is the target, ``n`` is usually Max-Gram (MaG).
  A forward pass of model ``i`` that processes ``m`` token positions costs ``c_i(m)``
  (:mod:`ewif.kernel.pass_cost`), relative to the target's generating pass (``c_0(1) = 1``),
  either **affine**, ``c_i(m) = cost[i] + cost_per_token[i]·m`` (``cost[0] = 1``,
  ``cost_per_token`` defaults to 0), or a **measured curve** ``c_i(m) =
  cost_curve[i][m − 1]`` for ``m = 1..M_i`` (``cost_curve[0][0] = 1``), extended beyond
  ``M_i`` on the line through its last two points, or flat at the last value if that
  line would decrease (a pass never gets cheaper beyond the measured range; a one-point
  curve extends flat). **Definition of m:** a generating (leaf) pass processes ``m = 1``
  position; a review pass over a draft of ``D`` tokens processes ``m = D + 1`` positions
  (one per draft token and the bonus position), so an empty-draft review costs the same
  as a generating pass.
* ``alpha[r][j]`` (``r < j``): probability that reviewer ``r`` accepts a token proposed by
  model ``j`` — independent Bernoulli trials; the values already reflect the lenience used
  at that review (the target's row is always lenience 1). Entries ``r >= j`` are ignored;
  an entry the configuration never uses may be NaN ("not measured").
* ``K`` is upper-triangular ``n×n``, 1-based as in the paper's Table 5: ``k_rj =
  K[r-1, j-1]`` is the token budget of drafter ``j`` when model ``r−1`` reviews (``r = 1``:
  the target). Appendix B's ``[[2, 10], [0, 10]]`` for (target, 68M, MaG): the target
  reviews ≥ 2 tokens from 68M (68M reviewing 10-token MaG drafts), then 10 straight from MaG.
* A *review call* by model ``r`` builds its draft block by block, ``j = r+1..n`` in order
  (a zero budget skips the block). A drafter ``j`` whose own K row is all zero (or
  ``j = n``) is a *leaf*: it generates its block directly, one token per pass (``m = 1``).
  Otherwise the block is filled by repeated review calls of ``j`` (each yields accepted+1
  tokens):

  - ``fill="tokens"`` (our reading of the paper's Algorithm 1, which leaves it open —
    docs/findings.md, "Algorithm 1's budgets"; the default): calls are repeated until the
    block holds **at least** ``k_(r+1)j`` tokens;
  - ``fill="rounds"``: exactly ``k_(r+1)j`` review calls — with this reading Theorem 4.3's
    ``n`` fixed rounds is the exact special case ``K = [[n, 0], [0, k]]``.

  Then ``r`` runs one pass over the whole draft; token ``i`` of block ``j`` is accepted
  with probability ``alpha[r][j]``; the first rejection ends the review; the call yields
  accepted + 1 tokens (the correction or bonus token).
* Terms. A *review call* is one call of Algorithm 1's recursive step (above); a *pass* is
  one forward pass of one model (a review call of ``r`` makes one pass of ``r`` and the
  passes of the blocks under it). A *neural* model computes next-token logits over a KV
  cache and pays per pass by the positions ``m`` it processes — the target and every
  drafter a decoder runs as a ``TokenModel`` (transformers, llama.cpp or the seeded
  synthetic models); only a neural drafter has a catch-up pass (:mod:`ewif.kernel.catch_up`). A
  *proposer* (Max-Gram, the bigram table) looks its tokens up — no cache, no logits — and
  can only be a leaf.
* EWIF = E[tokens per target review] / E[cost per target review] × (cost of one
  autoregressive target token, ``c_0(1)``: ``cost[0] + cost_per_token[0]`` when affine, 1
  for a curve) — renewal–reward, so autoregressive decoding has EWIF exactly 1.

Malformed configurations (wrong shapes, K not upper-triangular or negative or non-integer,
the target's K row all zero, a drafter that is never asked for tokens, alpha outside [0, 1]
or missing (NaN) for a pair the configuration uses, negative costs, ``cost[0] != 1``, bad
curves, a ``cost`` that differs from the curves' ``m = 1`` values, ``cost_per_token``
together with ``cost_curve``) raise ``ValueError`` naming the entry.

Method
------
One review call is computed by the kernel :func:`ewif.kernel.review_call.review_call` (shared
with the optimizer): block lengths are exact stopped sums (renewal sequence) or
convolution powers, the tokens PGF is a product over independent blocks, the draft length
``D`` has the exact convolution pmf of the block lengths so the review pass costs
``E[c_r(D + 1)]`` exactly, and nested calls are priced by Wald's identity. Everything is
polynomial arithmetic on finite supports — exact up to rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ewif.base import limits, validate
from ewif.kernel.budgets import FILLS, Rows, drafters_reached, rows_of
from ewif.kernel.catch_up import Feed, feed, stationary_tail, step_pass_sizes
from ewif.kernel.finite_length import CaughtUp, entry_costs, generation_costs, generation_lengths
from ewif.kernel.pass_cost import PassCost, relative_costs
from ewif.kernel.review_call import Call, review_call
from ewif.theory.pgf import Pgf

__all__ = ["FILLS", "Cascade", "PassSizes"]


@dataclass(frozen=True)
class PassSizes:
    """The passes of one model per target step, by the number ``m`` of positions they process.

    ``counts[m]`` is the expected number of passes with ``m`` positions per target step and
    ``cost[m] = counts[m]·c_i(m)`` the expected cost they contribute (``counts[0] = 0``), at
    all their logit rows: a catch-up drafter's rows it does not return,
    ``h_i·``:meth:`Cascade.catch_up_positions`, come off its total only.
    """

    model: int
    name: str | None
    counts: np.ndarray
    cost: np.ndarray

    @property
    def passes(self) -> float:
        """Expected passes of the model per target step."""
        return float(self.counts.sum())

    @property
    def pmf(self) -> np.ndarray:
        """``pmf[m]``: the distribution of ``m`` over the model's passes (zeros if none)."""
        total = self.counts.sum()
        return self.counts / total if total > 0 else self.counts.copy()

    @property
    def support(self) -> np.ndarray:
        """The values of ``m`` its passes take (with positive probability)."""
        return np.flatnonzero(self.counts > 0)

    @property
    def mean_m(self) -> float:
        """Mean positions per pass (NaN when the model makes no pass)."""
        total = self.counts.sum()
        return float(np.arange(self.counts.size) @ self.counts / total) if total > 0 else np.nan

    @property
    def total_cost(self) -> float:
        """Expected cost of the model's passes per target step."""
        return float(self.cost.sum())


class Cascade:
    """One configuration of Algorithm 1: models ``0..n`` (target first), alphas, costs and K.

    See the module docstring for the exact semantics (they are the contract).

    Parameters
    ----------
    alpha : (n+1, n+1) array — ``alpha[r, j]`` acceptance of reviewer ``r`` for tokens of ``j``.
    cost : (n+1,) array — pass cost relative to the target, ``cost[0] = 1``; with
        ``cost_curve`` it may be None (then the curves' ``m = 1`` values) and otherwise must
        equal them.
    K : (n, n) upper-triangular non-negative integer array — ``K[r-1, j-1] = k_rj``.
    cost_per_token : (n+1,) array or None — affine part of the pass cost (per position m);
        not allowed together with ``cost_curve``.
    fill : ``"tokens"`` (at least k tokens per block) or ``"rounds"`` (exactly k review calls).
    names : optional model names, for reports.
    cost_curve : list of n+1 sequences or None — measured pass costs ``cost_curve[i][m-1]``
        (see the module docstring for the extrapolation rule).
    catch_up : n+1 booleans or None — ``catch_up[i]`` prices model ``i``'s passes at the
        positions a KV-cached model really feeds (:mod:`ewif.kernel.catch_up`: its own last token,
        the reviewer's correction, other models' accepted tokens); False (the default for
        every model) is the paper's accounting. Proposers without a cache (Max-Gram) keep
        False; the target's flag changes nothing (it always reviews its whole draft).
    row_cost : n+1 numbers >= 0 or None (zeros) — ``h_i``, the cost of one logit row of
        model ``i``: the costs price a pass at all its rows, and a catch-up position returns
        none, so a catch-up drafter pays ``h_i`` less per catch-up position
        (:mod:`ewif.kernel.pass_cost`, "Logit rows").
    row_step : n+1 numbers >= 0 or None (zeros) — ``s_i``, the extra cost of a pass's second
        logit row (:mod:`ewif.kernel.pass_cost`, "Row step"): a catch-up drafter's one-row
        pass over ``m >= 2`` positions pays ``s_i`` less (:meth:`row_step_passes`).

    Attributes ``alpha, cost, cost_per_token, K, n, fill, names`` are read-only arrays/values;
    ``cost`` holds the ``m = 1`` costs when curves are given (``cost_per_token`` is then
    zero), ``cost_curve`` the curves (tuple of arrays, None when affine) and ``pass_cost``
    the :class:`ewif.kernel.pass_cost.PassCost` that prices every pass.
    """

    def __init__(
        self,
        alpha: object,
        cost: object,
        K: object,
        cost_per_token: object | None = None,
        fill: str = "tokens",
        names: tuple[str, ...] | list[str] | None = None,
        cost_curve: object | None = None,
        catch_up: object | None = None,
        row_cost: object | None = None,
        row_step: object | None = None,
    ) -> None:
        if fill not in FILLS:
            raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
        cost, cpt, pass_cost = _prices(cost, cost_per_token, cost_curve, (row_cost, row_step))
        n = cost.size - 1
        try:
            alpha = np.array(alpha, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"alpha must be an array of numbers, got {alpha!r}") from None
        if alpha.shape != (n + 1, n + 1):
            raise ValueError(
                f"alpha must have shape ({n + 1}, {n + 1}) (one row and column per model), "
                f"got {alpha.shape}"
            )
        K = validate.budget_matrix("K", K, n)
        if not K[0].any():
            raise ValueError(
                "K row 1 (the target's budgets k_11..k_1n) is all zero: the target would "
                "review an empty draft"
            )
        limits.total_budget("K", K)
        if names is not None:
            names = tuple(str(x) for x in names)
            validate.same_length(names=names, cost=cost)
        rows = rows_of(K)
        self._check_alpha(alpha, rows, n)
        for arr in (alpha, cost, cpt, K):
            arr.setflags(write=False)
        self.alpha, self.cost, self.cost_per_token, self.K = alpha, cost, cpt, K
        self.n, self.fill, self.names = n, fill, names
        self.pass_cost = pass_cost
        self.cost_curve = (
            None if cost_curve is None else tuple(pass_cost.table(i) for i in range(n + 1))
        )
        flags = [False] * (n + 1) if catch_up is None else catch_up
        self.catch_up = validate.flags("catch_up", flags, n + 1)
        self._rows = rows
        self._memo: dict = {}
        self._feed_calls: dict = {}
        self._feeds: dict = {}

    def with_alpha(self, alpha: object) -> Cascade:
        """The same configuration (costs, K, fill, names, catch-up flags) with acceptance
        matrix ``alpha`` instead."""
        return self._rebuilt(alpha, self.catch_up, *self._row_prices())

    def with_catch_up(self, catch_up: object) -> Cascade:
        """The same configuration (acceptance, costs, K, fill, names) with catch-up flags
        ``catch_up`` instead (all False: the paper's pass accounting)."""
        return self._rebuilt(self.alpha, catch_up, *self._row_prices())

    def with_row_cost(self, row_cost: object | None, row_step: object | None = None) -> Cascade:
        """The same configuration with logit-row costs ``row_cost`` and row step ``row_step``
        instead (None: zeros; both None: every pass priced at all its rows)."""
        return self._rebuilt(self.alpha, self.catch_up, row_cost, row_step)

    def _row_prices(self) -> tuple[np.ndarray, np.ndarray]:
        """``(row_cost, row_step)`` of the pass costs."""
        return self.pass_cost.row_cost, self.pass_cost.row_step

    def _rebuilt(
        self,
        alpha: object,
        catch_up: object,
        row_cost: object | None = None,
        row_step: object | None = None,
    ) -> Cascade:
        return Cascade(alpha, self.cost, self.K, **self._kept(catch_up, row_cost, row_step))

    def _kept(self, catch_up: object, row_cost: object | None, row_step: object | None) -> dict:
        """The keywords a rebuilt cascade takes from this one — its costs (the curves, or
        ``cost_per_token``), ``fill`` and ``names`` — with catch-up flags ``catch_up`` and row
        prices ``row_cost``, ``row_step`` (:meth:`_rebuilt` and its overrides)."""
        curves = None if self.cost_curve is None else list(self.cost_curve)
        return {
            "cost_per_token": None if curves is not None else self.cost_per_token,
            "fill": self.fill,
            "names": self.names,
            "cost_curve": curves,
            "catch_up": catch_up,
            "row_cost": row_cost,
            "row_step": row_step,
        }

    @staticmethod
    def _check_alpha(alpha: np.ndarray, rows: Rows, n: int) -> None:
        """alpha in [0, 1] where given, known (not NaN) for every pair the configuration
        uses, and every drafter reached (:func:`ewif.kernel.review_call.drafters_reached`)."""
        upper = np.triu(np.ones((n + 1, n + 1), dtype=bool), 1)
        present = upper & ~np.isnan(alpha)
        bad = present & ~((alpha >= 0.0) & (alpha <= 1.0))
        for r, j in zip(*np.nonzero(bad), strict=True):
            raise ValueError(f"alpha[{r}, {j}] must be in [0, 1], got {alpha[r, j]!r}")
        reached = drafters_reached(0, rows)
        for r in sorted({0} | reached - {n}):
            for j, b in enumerate(rows[r], start=r + 1):
                if b and np.isnan(alpha[r, j]):
                    raise ValueError(
                        f"alpha[{r}, {j}] is missing (NaN) but the configuration uses it: "
                        f"model {r} reviews tokens of model {j} (k_{r + 1}{j} = {b})"
                    )
        for j in range(1, n + 1):
            if j not in reached:
                raise ValueError(
                    f"drafter {j} has no way to produce tokens for the target: no reviewer "
                    f"that is reached gives it a budget (column {j} of K is zero in every "
                    f"used row); drop it from the models"
                )

    # ------------------------------------------------------------------ exact evaluation
    def _call(self) -> Call:
        """The target's review call (the kernel memoises every nested call)."""
        return review_call(0, self._rows, self.alpha, self.pass_cost, self.fill, self._memo)

    def tokens_pgf(self) -> Pgf:
        """The exact distribution of tokens one target step yields (accepted + 1)."""
        return Pgf(np.clip(self._call().pmf, 0.0, 1.0))

    def expected_tokens(self) -> float:
        """E[tokens per target step] = ``tokens_pgf().mean()``."""
        pmf = self._call().pmf
        return float(np.arange(pmf.size) @ pmf)

    def step_feed(self, i: int) -> Feed | None:
        """How drafter ``i`` feeds its cache in one target step
        (:class:`~ewif.kernel.catch_up.Feed`, Theorem CU); None for the target and for a model
        without catch-up."""
        if i == 0 or not self.catch_up[i]:
            return None
        return feed(i, 0, self._rows, self.alpha, self.fill, self._feed_calls, self._feeds)

    def _step_sizes(self, i: int) -> np.ndarray:
        """Expected passes of model ``i`` per target step by positions ``m`` (with its
        catch-up pass when ``catch_up[i]``, Theorem CU of :mod:`ewif.kernel.catch_up`)."""
        step = self.step_feed(i)
        return self._call().sizes[i] if step is None else step_pass_sizes(step)

    def first_pass_sizes(self, i: int) -> np.ndarray:
        """``f[m]``: the law of the positions of model ``i``'s first pass in a target step,
        ``π ⊛ first`` of Theorem CU (:mod:`ewif.kernel.catch_up`) — the one pass that carries the
        catch-up; ``catch_up[i]`` must be set for a drafter ``i >= 1`` the target's K reaches.
        Zeros when the target's K does not reach ``i``."""
        i = validate.count("i", i, minimum=1)
        if i > self.n or not self.catch_up[i]:
            raise ValueError(f"i must be a drafter in [1, {self.n}] with catch_up set, got {i}")
        step = self.step_feed(i)
        return np.convolve(stationary_tail(step), step.first)

    def logit_rows(self, i: int) -> float:
        """Expected logit rows model ``i``'s passes return per target step: the paper's
        positions ``Σ_m m·sizes[m]`` (1 per generating pass, ``D + 1`` per review), whatever
        it catches up."""
        paper = self._call().sizes[i]
        return float(paper @ np.arange(paper.size))

    def catch_up_positions(self, i: int) -> float:
        """Expected catch-up positions of model ``i`` per target step: positions it feeds
        beyond its :meth:`logit_rows` (Theorem CU's ``Σ_m m·sizes[m]`` minus the paper's, the
        same passes). They return no logit row; 0 for a model without catch-up."""
        step = self.step_feed(i)
        if step is None:
            return 0.0
        fed = step_pass_sizes(step)
        return float(fed @ np.arange(fed.size)) - self.logit_rows(i)

    def one_row_passes(self, i: int) -> float:
        """Expected passes of model ``i`` per target step that return one logit row: the
        paper's passes at ``m = 1`` (generating passes and a tree's root pass)."""
        paper = self._call().sizes[i]
        return float(paper[1]) if paper.size > 1 else 0.0

    def row_step_passes(self, i: int) -> float:
        """Expected passes of model ``i`` per target step that return one logit row but feed
        ``m >= 2`` positions — those a row step ``s_i`` prices ``s_i`` lower (Theorem CU, row
        step, :mod:`ewif.kernel.catch_up`): :meth:`one_row_passes` minus the passes that
        feed one position. 0 for a model without catch-up."""
        step = self.step_feed(i)
        if step is None:
            return 0.0
        fed = step_pass_sizes(step)
        return self.one_row_passes(i) - (float(fed[1]) if fed.size > 1 else 0.0)

    def model_step_costs(self) -> np.ndarray:
        """Expected cost per target step of each model ``0..n`` (stationary: a catch-up
        drafter's first pass at the stationary tail law, Theorem CU; its catch-up positions
        without their logit rows, ``− h_i·``:meth:`catch_up_positions` ``− s_i·``
        :meth:`row_step_passes`, Theorem CU, row step)."""
        cost = self._call().cost.copy()
        h, s = self.pass_cost.row_cost, self.pass_cost.row_step
        for i in np.flatnonzero(self.catch_up):
            if i > 0:
                cost[i] = self.pass_cost.expected(int(i), self._step_sizes(int(i)))
                if h[i]:
                    cost[i] -= h[i] * self.catch_up_positions(int(i))
                if s[i]:
                    cost[i] -= s[i] * self.row_step_passes(int(i))
        return cost

    def expected_cost(self) -> float:
        """E[cost of one target step] in target-pass units (all models, all passes)."""
        return float(self.model_step_costs().sum())

    def ewif(self, max_new_tokens: int | Sequence[int] | None = None) -> float:
        """Expected walltime improvement factor over autoregressive decoding.

        ``None``: an endless generation, ``E[tokens per step]·c_0(1)/E[cost per step]``
        (renewal–reward). An int ``N``: a generation of ``N`` tokens, whose last step pays
        for tokens it cannot keep (Theorem FL, :mod:`ewif.kernel.finite_length`); a sequence: a
        workload of generations of those lengths, ``Σ N_p·c_0(1) / Σ E[C(N_p)]``.
        """
        if max_new_tokens is None:
            return self.expected_tokens() * self.pass_cost.unit / self.expected_cost()
        lengths = generation_lengths(max_new_tokens)
        costs = self.generation_costs(lengths)
        return sum(lengths) * self.pass_cost.unit / sum(costs[n] for n in lengths)

    def generation_cost(self, n: int) -> float:
        """``E[C(n)]``: expected cost (in the cascade's cost units) of a generation of ``n``
        tokens, every model's passes included (Theorem FL, :mod:`ewif.kernel.finite_length`)."""
        return self.generation_costs([n])[n]

    def generation_costs(self, lengths: Sequence[int]) -> dict[int, float]:
        """``E[C(n)]`` for every ``n`` in ``lengths`` (Theorem FL): the models whose step cost
        does not depend on the past at their stationary cost per step, each catch-up drafter by
        the tail its steps enter with."""
        fixed, caught = 0.0, []
        for i, cost in enumerate(self.model_step_costs()):
            step = self.step_feed(i)
            if step is None:
                fixed += float(cost)
                continue
            rows = (self.logit_rows(i), self.one_row_passes(i))
            entry = entry_costs(self.K, i, step, self.pass_cost, *rows)
            caught.append(CaughtUp(entry, step.exit))
        pmf = np.asarray(self.tokens_pgf().coefficients, dtype=float)
        return generation_costs(pmf, fixed, caught, lengths)

    def passes_per_step(self) -> np.ndarray:
        """Expected forward passes of each model ``0..n`` per target step (the target's is 1)."""
        return self._call().passes.copy()

    def pass_sizes(self) -> list[PassSizes]:
        """For each model ``0..n``: its passes per target step by positions ``m``, and what
        they cost — e.g. ``pass_sizes()[0]`` is the target's review, ``m = D + 1``, whose
        ``pmf`` is the exact distribution of the draft length plus one."""
        out = []
        for i in range(self.n + 1):
            counts = self._step_sizes(i).copy()
            m = np.arange(counts.size)
            cost = np.zeros(counts.size)
            cost[1:] = counts[1:] * self.pass_cost.at(i, m[1:])
            name = self.names[i] if self.names else None
            out.append(PassSizes(i, name, counts, cost))
        return out

    def swi_breakdown(self) -> np.ndarray:
        """Share of the expected step cost spent in each model ``0..n`` (sums to 1)."""
        c = self.model_step_costs()
        return c / c.sum()

    def acceptance_by_position(self, max_position: int, conditional: bool = False) -> np.ndarray:
        """Acceptance of draft position ``i = 1..max_position`` at the target (Figure-2 curve).

        Unconditional: ``P(position i exists and is accepted) = P(A >= i)`` (A = accepted
        count; a position is only reviewed if all before it were accepted). Conditional:
        ``P(A >= i | A >= i−1 and D >= i)`` — the acceptance rate of position ``i`` among
        steps whose draft reaches it; NaN where that event has probability 0. For a single
        drafter with budget k, the unconditional curve is ``α^i`` for ``i <= k`` and the
        conditional one is ``α``.
        """
        m = validate.count("max_position", max_position, minimum=1)
        call = self._call()
        tail = np.concatenate([np.cumsum(call.pmf[::-1])[::-1], [0.0]])  # P(tokens >= t)
        idx = np.arange(1, m + 1)
        at_least = tail[np.minimum(idx + 1, tail.size - 1)]  # P(A >= i)
        if not conditional:
            return at_least
        prev = tail[np.minimum(idx, tail.size - 1)]  # P(A >= i-1)
        done = np.concatenate([call.all_accepted, np.zeros(max(0, m - call.all_accepted.size))])
        reach = prev - done[idx - 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(reach > 1e-300, at_least / np.where(reach > 0, reach, 1.0), np.nan)

    def __repr__(self) -> str:
        models = f"names={list(self.names)}, " if self.names else ""
        return f"Cascade({models}K={self.K.tolist()}, fill={self.fill!r}, ewif={self.ewif():.6g})"


def _prices(
    cost: object | None,
    cost_per_token: object | None,
    cost_curve: object | None,
    rows: tuple[object | None, object | None],
) -> tuple[np.ndarray, np.ndarray, PassCost]:
    """``(cost, cost_per_token, pass_cost)`` of a :class:`Cascade`, checked: affine costs
    (:func:`ewif.kernel.pass_cost.relative_costs`), or measured curves with ``cost`` omitted or
    equal to their ``m = 1`` values and no ``cost_per_token``; ``rows = (row_cost,
    row_step)`` per model."""
    if cost_curve is None:
        if cost is None:
            raise ValueError("cost is required unless cost_curve is given")
        cost, cpt = relative_costs(cost, cost_per_token)
        return cost, cpt, PassCost.affine(cost, cpt, *rows)
    if cost_per_token is not None:
        raise ValueError(
            "give cost_per_token or cost_curve, not both: a measured curve already "
            "prices a pass at every m"
        )
    pass_cost = PassCost.from_curves(cost_curve, row_cost=rows[0], row_step=rows[1])
    cost, cpt = relative_costs(pass_cost.m1_costs(cost))
    return cost, cpt, pass_cost
