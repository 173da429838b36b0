"""The speed-up of a workload that mixes kinds of text, exactly (Theorem MX).

A workload is rarely one kind of text: a user's requests are some writing, some code, some
answers from a long given document, each kind with its own acceptance. Let category ``c``
make the share ``w_c`` of the workload's generated tokens (``w_c >= 0``, ``Σ w_c = 1``; a
request of category ``c`` arrives with probability ``π_c`` and generates ``N_c`` tokens, so
``w_c = π_c N_c / Σ_d π_d N_d`` — the request shares when every request generates the same
number of tokens) and let ``S_c`` be a configuration's speed-up on category ``c`` alone: the
exact EWIF of its generations (Theorem FL: ``S_c = N_c·c_0(1) / E[C_c(N_c)]``, or the
renewal–reward EWIF for endless ones).

**Theorem MX.** Over a stream of independent requests the speed-up — the autoregressive cost
of the tokens made over the cost paid, ``Σ_i N_i·c_0(1) / Σ_i C_i`` — tends almost surely to

    S_mix = 1 / Σ_c (w_c / S_c),

the ``w``-weighted harmonic mean of the categories' speed-ups.

*Proof.* Requests are i.i.d., so by the strong law of large numbers the ratio of sums tends to
``E[N·c_0(1)] / E[C] = Σ_c π_c N_c c_0(1) / Σ_c π_c E[C_c(N_c)]``; with
``E[C_c(N_c)] = N_c c_0(1) / S_c`` the denominator is ``Σ_c π_c N_c c_0(1) / S_c``, and
dividing both sums by ``Σ_d π_d N_d c_0(1)`` gives ``1 / Σ_c w_c / S_c``. For endless
generations the same holds of long requests, each category's tokens per cost tending to
``S_c / c_0(1)`` (renewal–reward). ∎

A mix is therefore **not** the EWIF at the mixed α: the speed-up is a ratio of summed tokens
over summed costs *across* requests, each category's costs paid at its own acceptance.

**Corollary MX.1 (pooling α is optimistic at a fixed step cost).** Let a configuration's
expected cost per target step ``κ`` not depend on α (plain drafting with ``k`` draft tokens
from a drafter without catch-up, or from a proposer, endless generations), so that
``S(α) = τ(α)·c_0(1)/κ`` with ``τ(α) = Σ_{i=0}^{k} α^i`` tokens per step. Then

    S_mix <= S(ᾱ),     ᾱ = Σ_c w_c α_c,

with equality iff all ``α_c`` with ``w_c > 0`` are equal; ``ᾱ`` is what pooling the positions
of a measurement whose category shares are ``w`` measures (teacher-forced positions are the
target's tokens). *Proof.* ``S_mix = c_0(1)/(κ Σ_c w_c/τ(α_c))``, so it is enough that
``1/τ`` is convex on ``[0, 1]`` (Jensen). With ``g = τ``, ``(1/g)'' = (2g'² − g g'')/g³``, and
``α²(2g'² − g g'') = Σ_n a_n α^n`` with ``a_n = Σ_{i+j=n, 0<=i,j<=k} (n² + 2n − 3(i−j)²)/4``
(symmetrising ``2ij − j(j−1)`` over ``i ↔ j``). For ``n <= k`` every ``d = i − j`` in
``{−n, −n+2, …, n}`` occurs and ``Σ_d (n² + 2n − 3d²) = (n+1)n(n+2) − n(n+1)(n+2) = 0``; for
``n > k`` only ``|d| <= 2k − n`` occur, the summand falls in ``|d|``, so the mean over these
central terms is at least the full mean 0. Hence every ``a_n >= 0``, ``1/τ`` is convex, and
strictly so for ``k >= 1``: for ``n = k + 1`` terms are left out, all smaller than those
kept, so the central mean exceeds 0 strictly and ``a_{k+1} > 0``; the polynomial is positive
for ``α > 0``. ∎ Beyond a fixed step cost
(catch-up, cascades, finite generations) neither direction is guaranteed: price the mix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ewif.base import validate

__all__ = ["mixture_speedup"]


def mixture_speedup(speedups: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """``1 / Σ_c w_c / S_c`` (Theorem MX) over the categories of ``weights`` (shares of the
    generated tokens, ``>= 0``, summing to 1; a category of weight 0 needs no speed-up);
    ``speedups[c] = S_c > 0``. ValueError on a missing or non-positive speed-up."""
    total = 0.0
    for name, w in weights.items():
        if validate.cost(f"weight of {name!r}", w) == 0.0:
            continue
        s = speedups.get(name)
        if s is None or not (math.isfinite(s) and s > 0):
            raise ValueError(
                f"category {name!r} needs a finite speed-up > 0, got {validate.shown(s)}"
            )
        total += w / s
    if not total > 0:
        raise ValueError("the mix has no category of positive weight")
    return 1.0 / total
