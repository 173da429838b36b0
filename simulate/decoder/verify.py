r"""The verify step of Algorithm 1: one reviewer checks a draft — exact speculative sampling
with lenience (:func:`speculative_verify`), and the greedy check (:func:`greedy_verify`).

Sampling review (Leviathan et al., Algorithm 1 / Theorem 3.5 there; with the CS Drafting
paper's lenience ``l >= 1``). The reviewer's next-token distributions are
``p_0..p_L`` (one pass over prefix + draft); draft token ``x_i`` was drawn from ``q_i``.
Scanning ``i = 0, 1, ...``: accept ``x_i`` with probability ``min(1, l·p_i(x_i)/q_i(x_i))``;
at the first rejection output a token from the residual ``norm(max(0, p_i − q_i))`` and
stop; if all ``L`` are accepted, output a bonus token from ``p_L``. The review yields
``accepted + 1`` tokens.

**Law of an output token.** Write ``m(x) = min(q(x), l·p(x))``, ``β = Σ_x m(x)``. Given
everything that happened before position ``i``, the token output at ``i`` has law

    r = m + (1 − β) · norm(max(0, p − q))                                         (★)

(accepted with mass ``m``, otherwise resampled). For ``l = 1``: ``m = min(q, p)`` and
``Σ max(0, p − q) = 1 − β``, so ``r = min(q, p) + max(0, p − q) = p`` — the review is
lossless. For ``l > 1`` it is not: ``r ≠ p`` in general. The bonus token has law ``p_L``.

**Why a cascade with lenience below the target is still exact.** Speculative sampling
outputs ``p`` exactly *provided* ``q_i`` is the true conditional law of ``x_i`` given
everything that happened before position ``i`` (earlier tokens, earlier accept/reject
decisions at every level, which call or block produces position ``i``). In Algorithm 1
every random choice about position ``i`` — a leaf's draw, a sub-review's accept/resample
at ``i``, whether position ``i`` exists in a draft at all (budgets are checked against
lengths already produced; a review ends at a rejection already made) — depends only on
positions ``< i`` and fresh randomness; that later draft tokens are *computed* before the
review of ``i`` does not matter, since nothing about ``i`` depends on them. So by
induction over positions, the law at ``i`` of a token a model ``j`` hands upward is

* a leaf token of a TokenModel: ``p_j`` (the model's own distribution);
* a Proposer token: the point mass at it (``q(x) = 1``);
* a token output by a sub-review of ``j`` with lenience ``l``: ``r`` of (★), computed from
  the ``q`` of the token ``j`` reviewed there; its bonus token: ``p_j``.

The cascade carries exactly this ``r`` upward as the ``q`` of each token. The target then
reviews with ``l = 1``, and (★) with ``l = 1`` makes every token it outputs — accepted,
resampled or bonus — distributed as the target's ``p`` given the past: the output
sequence has the target's autoregressive law. Using ``q = p_j`` instead of ``r`` for a
leniently reviewed token (as a naive implementation would) is *not* exact; nor is
lenience at the target (``l > 1`` in (★) gives ``r ≠ p``), which the losslessness check
detects.

Point masses are never expanded into one-hot rows: a Proposer token's ``q`` is ``None``
(``q(x) = 1``, ``max(0, p − q) = p`` with ``x`` removed), and (★) of a point mass with
``β = min(1, l·p(x)) = 1`` is again the point mass (``None``).

Greedy review (temperature 0): accept ``x_i`` iff ``l·p_i(x_i) ≥ max p_i`` (``p_i =
softmax`` of the raw logits); for ``l = 1`` iff ``x_i`` is the argmax (ties: lowest id).
The correction or bonus token is the argmax. With ``l = 1`` at the target this yields
exactly the target's greedy decoding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from simulate.decoder.sampling import sample

#: Law of a draft token: a probability row over the vocabulary, or ``None`` for the
#: point mass at the token itself.
TokenLaw = np.ndarray | None


class Review(NamedTuple):
    """Result of one review: ``tokens`` (``accepted + 1`` ids: the accepted prefix of
    the draft, then the correction or bonus token), ``accepted`` (number of draft tokens
    accepted) and ``laws`` (law (★) of each output token, only when requested)."""

    tokens: list[int]
    accepted: int
    laws: list[TokenLaw] | None


def output_law(q: TokenLaw, x: int, p: np.ndarray, lenience: float) -> TokenLaw:
    """Law (★) ``m + (1 − β)·norm(max(0, p − q))`` of the token output at a position
    where draft token ``x ~ q`` is reviewed against ``p`` with ``lenience``.

    ``q is None`` means the point mass at ``x``; the result is ``None`` when it is again
    that point mass. For ``lenience == 1`` the result is ``p`` itself (exact review).
    """
    if lenience == 1.0:
        return p
    if q is None:
        beta = min(1.0, lenience * float(p[x]))
        if beta == 1.0:
            return None
        r = p * ((1.0 - beta) / (1.0 - float(p[x])))
        r[x] = beta
        return r
    m = np.minimum(q, lenience * p)
    beta = float(m.sum())
    residual = np.maximum(p - q, 0.0)
    z = float(residual.sum())
    if z > 0.0 and beta < 1.0:
        m += residual * ((1.0 - beta) / z)
        return m
    return m / beta  # beta == 1 up to rounding: nothing is ever rejected, r = m


def speculative_verify(
    draft: Sequence[int],
    draft_laws: Sequence[TokenLaw],
    probs: np.ndarray,
    lenience: float,
    rng: np.random.Generator,
    want_laws: bool,
) -> Review:
    """Review ``draft`` (laws ``draft_laws``) against the reviewer's ``probs`` of shape
    ``(len(draft) + 1, V)`` (row ``i``: distribution at draft position ``i``; the last
    row: the bonus position) with acceptance ``min(1, lenience·p/q)``.

    ``want_laws`` returns the law (★) of every output token (needed when the output is
    itself a draft for a higher model).
    """
    n = len(draft)
    u = rng.random(n) if n else ()
    a = 0
    while a < n:
        x = draft[a]
        q = draft_laws[a]
        qx = 1.0 if q is None else q[x]
        if u[a] * qx < lenience * probs[a, x]:
            a += 1
        else:
            break
    if a < n:
        p = probs[a]
        q = draft_laws[a]
        if q is None:
            residual = p.copy()
            residual[draft[a]] = 0.0
        else:
            residual = np.maximum(p - q, 0.0)
        # An all-zero residual means p <= q everywhere, i.e. p == q and a rejection of
        # probability 0 that only rounding produced; then p itself is the residual law.
        last = sample(residual if residual.sum() > 0.0 else p, rng)
    else:
        last = sample(probs[n], rng)
    tokens = [*draft[:a], last]
    if not want_laws:
        return Review(tokens, a, None)
    laws = [output_law(draft_laws[i], draft[i], probs[i], lenience) for i in range(min(a + 1, n))]
    if a == n:
        laws.append(probs[n])
    return Review(tokens, a, laws)


def greedy_verify(draft: Sequence[int], logits: np.ndarray, lenience: float) -> Review:
    """Greedy review of ``draft`` against raw ``logits`` of shape ``(len(draft) + 1, V)``:
    accept ``x`` iff ``lenience·p(x) >= max p`` (``lenience == 1``: iff ``x`` is the
    argmax, lowest id on ties); the last token is the argmax of the first rejected (or
    the bonus) row."""
    n = len(draft)
    a = 0
    if lenience == 1.0:
        best = np.argmax(logits[:n], axis=-1).tolist() if n else []
        while a < n and draft[a] == best[a]:
            a += 1
    else:
        slack = math.log(lenience)
        while a < n and logits[a, draft[a]] + slack >= logits[a].max():
            a += 1
    return Review([*draft[:a], int(np.argmax(logits[a]))], a, None)
