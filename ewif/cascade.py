"""Exact evaluation of any Algorithm-1 cascade under the Bernoulli acceptance model.

The paper gives closed forms only for special cases (Cor. 4.2: one drafter; Thm. 4.3: two
drafters with ``n`` fixed rounds; Thm. 4.5: one leaf drafter per position). :class:`Cascade`
evaluates every configuration of Algorithm 1 exactly: the full distribution of the tokens
one target step yields (its PGF, by dynamic programming over stopped sums — no sampling, no
truncation), and the expected cost of that step (Wald's identity).

Semantics (the contract shared with ``simulate`` and ``realrun``)
-----------------------------------------------------------------
* Models ``0..n``, largest first: 0 is the target, ``n`` is usually Max-Gram (MaG).
  ``cost[i]`` is one forward pass of model ``i`` relative to the target (``cost[0] = 1``),
  affine in the number ``m`` of token positions the pass processes:
  ``cost[i] + cost_per_token[i]·m`` (``cost_per_token`` defaults to 0). **Definition of m:**
  a generating (leaf) pass processes ``m = 1`` position; a review pass over a draft of
  ``D`` tokens processes ``m = D + 1`` positions (one per draft token and the bonus
  position), so an empty-draft review costs the same as a generating pass.
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

  - ``fill="tokens"`` (the issue's reading of the seed's ambiguous pseudo-code, and the
    default): calls are repeated until the block holds **at least** ``k_(r+1)j`` tokens;
  - ``fill="rounds"``: exactly ``k_(r+1)j`` review calls — with this reading Theorem 4.3's
    ``n`` fixed rounds is the exact special case ``K = [[n, 0], [0, k]]``.

  Then ``r`` runs one pass over the whole draft; token ``i`` of block ``j`` is accepted
  with probability ``alpha[r][j]``; the first rejection ends the review; the call yields
  accepted + 1 tokens (the correction or bonus token).
* EWIF = E[tokens per target review] / E[cost per target review] × (cost of one
  autoregressive target token, ``cost[0] + cost_per_token[0]``) — renewal–reward, so
  autoregressive decoding has EWIF exactly 1.

Malformed configurations (wrong shapes, K not upper-triangular or negative or non-integer,
the target's K row all zero, a drafter that is never asked for tokens, alpha outside [0, 1]
or missing (NaN) for a pair the configuration uses, negative costs, ``cost[0] != 1``) raise
``ValueError`` naming the entry.

Method
------
Let ``R_r(x)`` be the PGF of the tokens one review call of ``r`` yields. A leaf block of
budget ``b`` has length ``L = b``. A ``tokens`` block is the stopped sum ``L = S_N``,
``N = min{n : S_n >= b}`` of i.i.d. ``R_j`` draws: with the renewal sequence
``u(s) = P(some partial sum equals s)``, ``u(0) = 1``, ``u(s) = Σ_t P(R_j = t) u(s−t)``,
one has ``P(L = v) = Σ_{s<b} u(s) P(R_j = v − s)`` for ``v >= b`` and
``E[N] = Σ_{s<b} u(s)``. A ``rounds`` block is ``R_j^b``. Blocks are independent, so the
review is a product over blocks: with ``a = alpha[r][j]`` and ``S`` the (sub-)PGF of the
accepted count on the event that everything so far was accepted, each block contributes
``S·F_j`` to the stopped mass, ``F_j(x) = (1−a) Σ_i a^i P(L > i) x^i``, and updates
``S ← S·L_j(a x)``; finally ``R_r(x) = x·(Σ stopped + S)``. Costs: a block's expected cost
is ``E[N]`` times the expected cost of one call (Wald's identity: ``N`` is a stopping time of
the i.i.d. sequence of (tokens, cost) pairs), plus ``cost_per_token[r]·(E[D] + 1)`` for the
review pass. Everything is polynomial arithmetic on finite supports — exact up to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ewif import _validate
from ewif._numerics import padded_add, pmf_power
from ewif.pgf import Pgf

if TYPE_CHECKING:
    from ewif.io import ModelSet

FILLS = ("tokens", "rounds")


@dataclass(frozen=True)
class _Call:
    """One review call of a model: output pmf and per-model expected cost and passes."""

    pmf: np.ndarray  # pmf[t] = P(call yields t tokens); pmf[0] = 0
    cost: np.ndarray  # (n+1,) expected cost per call, split by model
    passes: np.ndarray  # (n+1,) expected forward passes per call, by model
    all_accepted: np.ndarray  # all_accepted[d] = P(draft length d and all d accepted)


def stopped_sum(pmf: np.ndarray, budget: int) -> tuple[np.ndarray, float]:
    """Overshoot distribution and expected count of i.i.d. draws until the sum reaches ``budget``.

    ``pmf[t] = P(R = t)`` with ``pmf[0] = 0``. Returns ``(l, E[N])`` with ``l[v] = P(S_N = v)``,
    ``N = min{n : S_n >= budget}``; ``budget = 0`` gives ``l = [1]`` and ``E[N] = 0``.
    """
    if budget == 0:
        return np.ones(1), 0.0
    u = np.zeros(budget)
    u[0] = 1.0
    r = pmf[1:budget]  # r[t-1] = P(R = t), t < budget
    for s in range(1, budget):
        m = min(s, r.size)
        u[s] = r[:m] @ u[s - 1 :: -1][:m]
    out = np.convolve(u, pmf)
    out[:budget] = 0.0
    return out, float(u.sum())


def review(blocks: list[tuple[float, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Tokens pmf of one review over independent blocks ``(accept, length_pmf)``, in order.

    Returns ``(tokens_pmf, all_accepted)``: ``tokens_pmf[t] = P(accepted + 1 = t)`` and
    ``all_accepted[d] = P(draft length = d and every draft token accepted)``.
    """
    stopped = np.zeros(1)
    s = np.ones(1)
    for a, length in blocks:
        powers = a ** np.arange(length.size, dtype=float)
        if length.size > 1:
            survival = 1.0 - np.cumsum(length[:-1])  # P(L > i), i = 0..max-1
            fail = (1.0 - a) * powers[:-1] * np.maximum(survival, 0.0)
            stopped = padded_add(stopped, np.convolve(s, fail))
        s = np.convolve(s, length * powers)
    tokens = np.concatenate([[0.0], padded_add(stopped, s)])
    return tokens, s


class Cascade:
    """One configuration of Algorithm 1: models ``0..n`` (target first), alphas, costs and K.

    See the module docstring for the exact semantics (they are the contract).

    Parameters
    ----------
    alpha : (n+1, n+1) array — ``alpha[r, j]`` acceptance of reviewer ``r`` for tokens of ``j``.
    cost : (n+1,) array — pass cost relative to the target, ``cost[0] = 1``.
    K : (n, n) upper-triangular non-negative integer array — ``K[r-1, j-1] = k_rj``.
    cost_per_token : (n+1,) array or None — affine part of the pass cost (per position m).
    fill : ``"tokens"`` (at least k tokens per block) or ``"rounds"`` (exactly k review calls).
    names : optional model names, for reports.

    Attributes ``alpha, cost, cost_per_token, K, n, fill, names`` are read-only arrays/values.
    """

    def __init__(
        self,
        alpha: object,
        cost: object,
        K: object,
        cost_per_token: object | None = None,
        fill: str = "tokens",
        names: tuple[str, ...] | list[str] | None = None,
    ) -> None:
        if fill not in FILLS:
            raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
        cost = _validate.costs("cost", cost)
        if cost.ndim != 1 or cost.size < 2:
            raise ValueError(
                f"cost must be a 1-D array with one entry per model (target + at least one "
                f"drafter), got shape {cost.shape}"
            )
        n = cost.size - 1
        if cost[0] != 1.0:
            raise ValueError(f"cost[0] (the target's pass) must be 1, got {cost[0]!r}")
        cpt = (
            np.zeros(n + 1)
            if cost_per_token is None
            else _validate.costs("cost_per_token", cost_per_token)
        )
        if cpt.shape != (n + 1,):
            raise ValueError(f"cost_per_token must have shape ({n + 1},), got {cpt.shape}")
        try:
            alpha = np.array(alpha, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"alpha must be an array of numbers, got {alpha!r}") from None
        if alpha.shape != (n + 1, n + 1):
            raise ValueError(
                f"alpha must have shape ({n + 1}, {n + 1}) (one row and column per model), "
                f"got {alpha.shape}"
            )
        K = _validate.counts("K", K)
        if K.shape != (n, n):
            raise ValueError(f"K must have shape ({n}, {n}) (one row per reviewer), got {K.shape}")
        for r, c in zip(*np.nonzero(np.tril(K, -1)), strict=True):
            raise ValueError(
                f"K must be upper-triangular: K[{r}, {c}] (k_{r + 1}{c + 1}) = {K[r, c]} is "
                f"below the diagonal (model {r} can only review smaller models {r + 1}..{n})"
            )
        if not K[0].any():
            raise ValueError(
                "K row 1 (the target's budgets k_11..k_1n) is all zero: the target would "
                "review an empty draft"
            )
        if names is not None:
            names = tuple(str(x) for x in names)
            _validate.same_length(names=names, cost=cost)
        self._check_alpha(alpha, K, n)
        for arr in (alpha, cost, cpt, K):
            arr.setflags(write=False)
        self.alpha, self.cost, self.cost_per_token, self.K = alpha, cost, cpt, K
        self.n, self.fill, self.names = n, fill, names
        self._calls: dict[int, _Call] = {}

    @staticmethod
    def _check_alpha(alpha: np.ndarray, K: np.ndarray, n: int) -> None:
        upper = np.triu(np.ones((n + 1, n + 1), dtype=bool), 1)
        present = upper & ~np.isnan(alpha)
        bad = present & ~((alpha >= 0.0) & (alpha <= 1.0))
        for r, j in zip(*np.nonzero(bad), strict=True):
            raise ValueError(f"alpha[{r}, {j}] must be in [0, 1], got {alpha[r, j]!r}")
        used = np.zeros(n + 1, dtype=bool)
        reviewers, seen = [0], {0}
        while reviewers:
            r = reviewers.pop()
            for j in range(r + 1, n + 1):
                if K[r, j - 1] == 0:
                    continue
                if np.isnan(alpha[r, j]):
                    raise ValueError(
                        f"alpha[{r}, {j}] is missing (NaN) but the configuration uses it: "
                        f"model {r} reviews tokens of model {j} (k_{r + 1}{j} = {K[r, j - 1]})"
                    )
                used[j] = True
                if j < n and K[j].any() and j not in seen:
                    seen.add(j)
                    reviewers.append(j)
        for j in range(1, n + 1):
            if not used[j]:
                raise ValueError(
                    f"drafter {j} has no way to produce tokens for the target: no reviewer "
                    f"that is reached gives it a budget (column {j} of K is zero in every "
                    f"used row); drop it from the models"
                )

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_model_set(
        cls,
        model_set: ModelSet,
        models: tuple[str, ...] | list[str] | None = None,
        K: object | None = None,
        lenience: float | None = None,
        fill: str = "tokens",
    ) -> Cascade:
        """The cascade of ``models`` (target first; default: the set's ``cascade`` section or
        all its models) with budgets ``K`` at ``lenience`` (default 1, or the section's)."""
        choice = model_set.cascade
        if models is None and choice is not None:
            models = choice.models
        if K is None:
            if choice is None:
                raise ValueError("K is required: the model set has no 'cascade' section")
            K = choice.K
        if lenience is None:
            lenience = choice.lenience if choice is not None else 1.0
        models = tuple(model_set.models if models is None else models)
        idx = [model_set.index(m) for m in models]
        if idx[0] != 0:
            raise ValueError(
                f"models must start with the target {model_set.models[0]!r}, got {models[0]!r}"
            )
        if sorted(idx) != idx or len(set(idx)) != len(idx):
            raise ValueError(
                f"models must be distinct and ordered largest first as in the set "
                f"{list(model_set.models)}, got {list(models)}"
            )
        lenience = float(lenience)
        if lenience not in model_set.alpha:
            raise ValueError(
                f"lenience {lenience:g} is not in the model set; available: "
                f"{', '.join(f'{x:g}' for x in model_set.leniences)}"
            )
        ix = np.asarray(idx)
        return cls(
            model_set.alpha[lenience][np.ix_(ix, ix)],
            model_set.cost[ix],
            K,
            cost_per_token=model_set.cost_per_token[ix],
            fill=fill,
            names=models,
        )

    # ------------------------------------------------------------------ exact evaluation
    def _call(self, r: int) -> _Call:
        """Review call of model ``r`` (memoised: a model's K row is the same wherever it
        reviews)."""
        if r in self._calls:
            return self._calls[r]
        n = self.n
        cost = np.zeros(n + 1)
        passes = np.zeros(n + 1)
        blocks = []
        draft_mean = 0.0
        for j in range(r + 1, n + 1):
            b = int(self.K[r, j - 1])
            if b == 0:
                continue
            if j == n or not self.K[j].any():  # leaf: b generating passes, m = 1 each
                length = np.zeros(b + 1)
                length[b] = 1.0
                passes[j] += b
                cost[j] += b * (self.cost[j] + self.cost_per_token[j])
            else:
                sub = self._call(j)
                if self.fill == "tokens":
                    length, calls = stopped_sum(sub.pmf, b)
                else:
                    length, calls = pmf_power(sub.pmf, b), float(b)
                passes += calls * sub.passes
                cost += calls * sub.cost
            draft_mean += float(np.arange(length.size) @ length)
            blocks.append((float(self.alpha[r, j]), length))
        pmf, all_accepted = review(blocks)
        passes[r] += 1.0
        cost[r] += self.cost[r] + self.cost_per_token[r] * (draft_mean + 1.0)
        call = _Call(pmf, cost, passes, all_accepted)
        self._calls[r] = call
        return call

    def tokens_pgf(self) -> Pgf:
        """The exact distribution of tokens one target step yields (accepted + 1)."""
        return Pgf(np.clip(self._call(0).pmf, 0.0, 1.0))

    def expected_tokens(self) -> float:
        """E[tokens per target step] = ``tokens_pgf().mean()``."""
        pmf = self._call(0).pmf
        return float(np.arange(pmf.size) @ pmf)

    def expected_cost(self) -> float:
        """E[cost of one target step] in target-pass units (all models, all passes)."""
        return float(self._call(0).cost.sum())

    def ewif(self) -> float:
        """Expected walltime improvement factor over autoregressive decoding (renewal–reward)."""
        ar = float(self.cost[0] + self.cost_per_token[0])
        return self.expected_tokens() * ar / self.expected_cost()

    def calls(self) -> np.ndarray:
        """Expected forward passes of each model ``0..n`` per target step (``calls()[0] = 1``)."""
        return self._call(0).passes.copy()

    def swi_breakdown(self) -> np.ndarray:
        """Share of the expected step cost spent in each model ``0..n`` (sums to 1)."""
        c = self._call(0).cost
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
        m = _validate.count("max_position", max_position, minimum=1)
        call = self._call(0)
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
