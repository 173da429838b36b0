"""The paper's vertical-cascade theory (Section 4.1), exact and cancellation-free.

Notation (i.i.d. acceptance): a reviewer accepts each draft token independently with
probability ``α``; a review of a ``j``-token draft produces the accepted prefix plus one
token of the reviewer's own, so it produces ``min(Geom, j) + 1`` tokens with mean
``G(α, j) = Σ_{i=0}^{j} α^i = (1 − α^(j+1))/(1 − α)``. Every ``G`` here is evaluated by
:func:`ewif.base.arithmetic.geometric_sum`, so ``α → 1`` is exact (``G(1, j) = j + 1``) and the
relative error stays ~1e-15 even at ``α = 1 − 1e-9``.

* Theorem 4.1 — :func:`phi`: the PGF of the tokens produced by one review.
* The operator ``T_α`` — :func:`T` (its mean) and :func:`review` (its distribution).
* Corollary 4.2 — :func:`sd_ewif`, and :func:`best_k` for the optimal draft length.
* Theorem 4.3 — :func:`vertical_ewif`, with the n-th *power* ``φ(α)^n`` (corrected from the
  paper's "n-fold composition", see its docstring).
* Corollary 4.4 — :func:`vertical_c2_threshold`: the exact bottom-model cost below which
  the vertical cascade beats plain speculative decoding.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ewif.base import validate
from ewif.base.arithmetic import geometric_sum
from ewif.theory.pgf import Pgf

#: A real scalar, or an array of them; the functions broadcast their arguments together.
Reals = float | np.ndarray
#: A whole-number scalar (a count, a budget), or an array of them.
Counts = int | np.ndarray

_MAX_K = 2**53
_EXACT_K = 2048  # best_k decides h(k) > 0 in rationals up to here


def phi(alpha: float, k: int) -> Pgf:
    """Theorem 4.1: ``φ_{α,k}``, the PGF of the tokens produced by one review of ``k`` drafts.

    ``P(i tokens) = α^(i−1)(1 − α)`` for ``i = 1..k`` (``i − 1`` accepted, then a rejection
    replaced by the reviewer's token) and ``α^k`` for ``i = k + 1`` (all accepted plus the
    bonus token). In closed form ``φ(x) = 1 + (x − 1)(1 − (αx)^(k+1))/(1 − αx)``, and
    ``φ'(1) = G(α, k) = (1 − α^(k+1))/(1 − α)`` (proved in :mod:`ewif.theory.symbolic`).
    ``k = 0`` gives ``x`` (the reviewer's own token); so does ``α = 0``.
    """
    alpha = validate.probability("alpha", alpha)
    k = validate.count("k", k)
    p = np.zeros(k + 2)
    p[1 : k + 1] = alpha ** np.arange(k) * (1.0 - alpha)
    p[k + 1] = alpha**k
    return Pgf(p)


def T(alpha: float, pgf: Pgf) -> float:
    """The operator ``T_α``: expected tokens when a reviewer of acceptance ``α`` reviews a
    draft whose length has PGF ``g``.

    ``T_α(g) = (1 − α g(α))/(1 − α) = Σ_j p_j G(α, j)``; linear in ``g`` with
    ``T_α(x^j) = (1 − α^(j+1))/(1 − α)``. Evaluated in the second (positive-sum) form,
    so ``T_1(g) = 1 + g'(1)`` is exact; ``T_0(g) = 1`` is returned exactly (rather than the
    rounded ``Σ p_j``). Equals ``review(α, g).mean()``.
    """
    alpha = validate.probability("alpha", alpha)
    p = _pgf("pgf", pgf).coefficients
    if alpha == 0:
        return 1.0
    return float(p @ geometric_sum(1.0 - alpha, np.arange(p.size)))


def review(alpha: float, pgf: Pgf) -> Pgf:
    """The distribution behind ``T_α``: ``Σ_j p_j φ_{α,j}``, tokens produced when a reviewer
    of acceptance ``α`` reviews a draft of random length ``L ~ g``.

    ``P(i tokens) = α^(i−1) ((1 − α) P(L ≥ i) + P(L = i − 1))`` for ``i ≥ 1``: the first
    ``i − 1`` tokens are accepted and then either token ``i`` exists and is rejected or the
    draft ended. Its mean is :func:`T`; ``review(α, Pgf.point(k)) == phi(α, k)``.
    """
    alpha = validate.probability("alpha", alpha)
    p = _pgf("pgf", pgf).coefficients
    tail = np.cumsum(p[::-1])[::-1]  # tail[i] = P(L >= i)
    out = np.zeros(p.size + 1)
    out[1:] = alpha ** np.arange(p.size) * (p + (1.0 - alpha) * np.append(tail[1:], 0.0))
    return Pgf(out)


def sd_ewif(alpha: Reals, k: Counts, c: Reals) -> Reals:
    """Corollary 4.2: EWIF of speculative decoding, ``(1 − α^(k+1)) / ((1 − α)(1 + k c))``.

    ``T_α(x^k)`` tokens per step over ``1 + k c`` target-time units per step. Broadcasts
    over arrays of ``alpha``, ``k``, ``c`` (float for scalars, ndarray otherwise).
    Exact edges: ``k = 0`` → 1, ``α = 0`` → ``1/(1 + kc)``, ``α = 1`` → ``(k+1)/(1 + kc)``.
    """
    a = validate.probabilities("alpha", alpha)
    kk = validate.counts("k", k)
    cc = validate.costs("c", c)
    _broadcast(alpha=a, k=kk, c=cc)
    return _scalar(geometric_sum(1.0 - a, kk) / (1.0 + kk * cc))


def best_k(alpha: float, c: float) -> tuple[int, float]:
    """The draft length maximising :func:`sd_ewif` and its EWIF, ``(k*, EWIF(k*))``.

    Let ``E(k) = G(α, k)/(1 + kc)``. Cross-multiplying, ``E(k+1) > E(k)`` iff
    ``h(k) = α^(k+1)(1 + kc) − c G(α, k) > 0``, and
    ``h(k+1) − h(k) = −(1 − α) α^(k+1) (1 + (k+1)c) < 0`` for ``0 < α < 1``: ``h`` is strictly
    decreasing, so ``E`` rises strictly while ``h > 0`` and falls afterwards. Hence
    ``k* = min{k ≥ 0 : h(k) ≤ 0}`` is the smallest maximiser (``k* + 1`` ties iff
    ``h(k*) = 0``); in particular ``k* = 0`` iff ``c ≥ α`` (``h(0) = α − c``).
    ``k*`` is found by doubling then bisection on the sign of ``h`` in ``O(log k*)``
    evaluations, each decided exactly (:func:`_rising`), so ``k*`` is exact for every
    float input. ``ValueError`` is raised only when ``h(2**53) > 0``, i.e. ``k*`` really
    exceeds ``2**53`` (beyond exact float integers).

    Edges: ``α = 0`` → ``(0, 1.0)`` (drafting never helps; every k ties when c = 0).
    ``α = 1`` → ``(0, 1.0)`` when ``c ≥ 1``. No finite optimum exists, and ``ValueError``
    is raised, when ``c = 0 < α`` (``E`` increases for ever) or ``α = 1`` with ``c < 1``
    (``E(k) = (k+1)/(1+kc)`` increases towards its supremum ``1/c``).
    """
    alpha = validate.probability("alpha", alpha)
    c = validate.cost("c", c)
    if alpha > 0 and (c == 0 or (alpha == 1 and c < 1)):
        raise ValueError(
            f"no finite optimal k for alpha={alpha!r}, c={c!r}: EWIF increases with k "
            "for ever; need c > 0 when alpha < 1 and c >= 1 when alpha == 1"
        )
    if alpha in (0.0, 1.0) or not _rising(alpha, c, 0):
        return 0, float(sd_ewif(alpha, 0, c))
    if _rising(alpha, c, _MAX_K):
        raise ValueError(
            f"optimal k for alpha={alpha!r}, c={c!r} exceeds 2**53 (EWIF still rises at "
            "k = 2**53); increase c or 1 - alpha"
        )
    lo, hi = 0, 1  # invariant: rising(lo) and not rising(hi) once the doubling stops
    while _rising(alpha, c, hi):
        lo, hi = hi, min(2 * hi, _MAX_K)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _rising(alpha, c, mid) else (lo, mid)
    return hi, float(sd_ewif(alpha, hi, c))


def _rising(alpha: float, c: float, k: int) -> bool:
    """``h(k) > 0`` (``E(k+1) > E(k)``) for ``0 < α < 1``, decided exactly.

    Multiplying ``h`` by ``1 − α > 0``: ``h(k) > 0`` iff
    ``d = α^(k+1) ((1 − α)(1 + kc) + c) − c > 0``. For ``k ≤ 2048`` ``d`` is evaluated in
    rational arithmetic (the floats are exact rationals). Beyond, ``d`` is enclosed by
    interval arithmetic (mpmath ``iv``) at 128 bits, doubled until the enclosure excludes
    0. That terminates because ``d ≠ 0`` for ``k > 2048``: write ``α = a/2^p`` (``a`` odd)
    and ``c = b/2^q`` (``b < 2^53``); ``d = 0`` makes ``a^(k+1)`` divide ``b``, so ``a ≥ 3``
    allows only ``k ≤ 32``, and ``a = 1`` (``α = 2^-p ≤ 1/2``) needs
    ``2^-(k+1) (k + 2) ≥ c ≥ 2^-1074``, i.e. ``k < 1100``.
    """
    if k <= _EXACT_K:
        a, cc = Fraction(alpha), Fraction(c)
        return a ** (k + 1) * ((1 - a) * (1 + k * cc) + cc) > cc
    from mpmath import iv

    saved, prec = iv.prec, 128
    try:
        while True:
            iv.prec = prec
            a, cc = iv.mpf(alpha), iv.mpf(c)
            positive = a ** (k + 1) * ((1 - a) * (1 + k * cc) + cc) - cc > 0  # None: undecided
            if positive is not None:
                return positive
            prec *= 2
    finally:
        iv.prec = saved


def vertical_ewif(alpha: Reals, alpha2: Reals, k: Counts, n: Counts, c1: Reals, c2: Reals) -> Reals:
    """Theorem 4.3 (corrected): EWIF of the two-level vertical cascade
    ``(1 − α φ(α)^n) / ((1 − α)(1 + n c1 + n k c2))`` with ``φ = φ_{α2,k}``.

    ``d2`` drafts ``k`` tokens, ``d1`` (acceptance ``α2`` against d2) reviews them, ``n``
    times; the target (acceptance ``α`` against d1) then reviews everything once. Round
    ``r`` produces ``X_r ~ φ`` tokens independently of the other rounds, so the draft length
    ``X_1 + … + X_n`` has PGF ``φ^n``, the n-th POWER, and the tokens per step are
    ``T_α(φ^n) = (1 − α φ(α)^n)/(1 − α)``. The paper's text reads ``φ^n`` as n-fold
    composition ``φ(φ(…φ(α)))``, which is the PGF of a branching process, not of n rounds;
    the tests check the power against an exact enumeration of all round outcomes and show
    the composition disagrees (they coincide only for ``n = 1``).
    Cost per step: 1 target review, ``n`` d1 reviews, ``n k`` d2 forward passes.

    Evaluated without cancellation as ``G(α, n) + α^n S1 G(r, n−1)`` where
    ``S1 = Σ_{i=1}^{k} (α α2)^i = (α − φ(α))/(1 − α)`` and ``r = φ(α)/α`` with
    ``1 − r = (1 − α) α2 G(α α2, k−1)``. Broadcasts over all six arguments.
    """
    a, a2, kk, nn, cc1 = _vertical_arguments(alpha, alpha2, k, n, c1)
    cc2 = validate.costs("c2", c2)
    _broadcast(alpha=a, alpha2=a2, k=kk, n=nn, c1=cc1, c2=cc2)
    tokens = geometric_sum(1.0 - a, nn) + _vertical_excess(a, a2, kk, nn)
    return _scalar(tokens / (1.0 + nn * cc1 + nn * kk * cc2))


def vertical_c2_threshold(alpha: Reals, alpha2: Reals, k: Counts, n: Counts, c1: Reals) -> Reals:
    """Corollary 4.4, exact: the bottom-model cost ``c2*`` at which the vertical cascade
    ties with speculative decoding by d1 alone with draft length n.

    ``vertical_ewif(α, α2, k, n, c1, c2)`` is ``>``, ``=``, ``<`` ``sd_ewif(α, n, c1)`` exactly
    when ``c2`` is ``<``, ``=``, ``>`` ``c2*``, where (for ``k, n ≥ 1``)
    ``c2* = (1 + n c1)(α^(n+1) − α φ(α)^n) / (n k (1 − α^(n+1)))
          = (1 + n c1) α^n S1 G(r, n−1) / (n k G(α, n))``.
    Proof: cross-multiply the two EWIFs; the token difference is
    ``α(α^n − φ(α)^n)/(1 − α) ≥ 0`` because ``α − φ_{α2,k}(α) = (1 − α) Σ_{i=1}^{k} (α α2)^i``.
    That identity is the exact form of the paper's ``φ_{α',k}(α) < α``: strict iff
    ``α < 1``, ``α α2 > 0`` and ``k ≥ 1``. So ``c2* > 0`` iff ``α > 0`` and ``α2 > 0``
    (α = 1 included, via the limit); with ``α = 0`` or ``α2 = 0`` the cascade never wins.
    For ``c2 > c2*`` the paper's "vertical cascade almost always improves EWIF" fails.
    """
    a, a2, kk, nn, cc1 = _vertical_arguments(alpha, alpha2, k, n, c1, minimum=1)
    _broadcast(alpha=a, alpha2=a2, k=kk, n=nn, c1=cc1)
    excess = _vertical_excess(a, a2, kk, nn)
    return _scalar((1.0 + nn * cc1) * excess / (nn * kk * geometric_sum(1.0 - a, nn)))


def _vertical_arguments(
    alpha: Reals, alpha2: Reals, k: Counts, n: Counts, c1: Reals, minimum: int = 0
) -> tuple[np.ndarray, ...]:
    """Theorem 4.3's ``α, α2, k, n, c1`` as checked arrays (``k, n >= minimum``)."""
    return (
        validate.probabilities("alpha", alpha),
        validate.probabilities("alpha2", alpha2),
        validate.counts("k", k, minimum=minimum),
        validate.counts("n", n, minimum=minimum),
        validate.costs("c1", c1),
    )


def _vertical_excess(a: np.ndarray, a2: np.ndarray, k: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``T_α(φ^n) − T_α(x^n) = α^n S1 G(r, n−1)``, a product of non-negative factors."""
    aa2 = a * a2
    inner = geometric_sum(1.0 - aa2, k - 1)  # Σ_{i=0}^{k-1} (α α2)^i
    s1 = aa2 * inner
    gap_r = (1.0 - a) * a2 * inner  # 1 − φ(α)/α
    return np.power(a, n) * s1 * geometric_sum(gap_r, n - 1)


def _pgf(name: str, value: object) -> Pgf:
    if not isinstance(value, Pgf):
        raise TypeError(f"{name} must be an ewif.Pgf, got {type(value).__name__}")
    return value


def _broadcast(**named: np.ndarray) -> None:
    try:
        np.broadcast_shapes(*(v.shape for v in named.values()))
    except ValueError:
        shown = ", ".join(f"{n}.shape={v.shape}" for n, v in named.items())
        raise ValueError(f"{', '.join(named)} must broadcast together, got {shown}") from None


def _scalar(x: np.ndarray) -> Reals:
    return float(x) if np.ndim(x) == 0 else x
