"""c(m, L) from the timing rounds: each pass's cost against its round's context length.

:func:`realrun.timing.time_family` times every model's passes at every ``m`` once a round,
each round on one measuring prompt and a drawn part of its continuation, so the rounds'
context lengths ``L_r`` spread as the measuring prompts' do. For each neural model ``i`` the
pass times ``t_r(m)`` are fitted by least squares to

    t_r(m) = t̄(m) + (L_r − L̄)·(u_i + w_i·m),

one intercept per ``m`` (the curve itself, at the rounds' mean length ``L̄``) and two slopes
per model: ``u_i`` what a longer context adds to every pass (the KV cache's handling; on
transformers on a CPU most of it), ``w_i`` what it adds per position (attention). An
autoregressive token is the target's one-token pass plus a loop that does not read the
cache, so its slope is the target's at ``m = 1``, ``u_0 + w_0``, referred to the mean
context of the timed generations (each generation's prompt plus half its tokens, weighted
by its tokens). In the curves' unit (seconds over ``t_AR``) this is
:class:`ewif.files.context_cost.ContextCost`. With fewer than three rounds, or contexts
spanning fewer than :data:`MIN_SPAN` tokens, the slope cannot be told from noise and no fit
is made (one curve for every context, as before).

Only slopes the rounds can tell from noise are kept (:func:`significant_slopes`): a term
whose estimate is within :data:`SIGNIFICANCE` standard errors of 0 is dropped and the other
refitted alone (backward elimination; two standard errors is a two-sided test at about 5 %),
so a model whose pass times do not move measurably with the context has slope 0. Eight
rounds of a 135M model's 25 ms passes on a shared 2-core machine gave slopes of either sign
at a fifth of a standard error, which priced a 143-token context 38 % off the run's AR; with
no model keeping a slope no fit is made.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ewif.files.context_cost import ContextCost
from realrun.timing import FamilyTiming

#: Fewest tokens between the shortest and the longest timed context for a fit.
MIN_SPAN = 32


#: Standard errors a slope's estimate must be away from 0 to be kept (two-sided, about 5 %).
SIGNIFICANCE = 2.0


def _design(contexts: Sequence[int], samples: Sequence[Sequence[float]], ms: Sequence[int]):
    """``(X, y, dof)`` of the module docstring's model with the intercepts t̄(m) taken out:
    columns ``(L − L̄, (L − L̄)·m)``, one row per (m, round)."""
    L = np.asarray(contexts, dtype=float)
    x = L - L.mean()
    Y = np.asarray([list(s)[: L.size] for s in samples], dtype=float)
    if Y.shape != (len(ms), L.size):
        raise ValueError(f"need one pass time per round ({L.size}) at every m, got {Y.shape}")
    y = (Y - Y.mean(axis=1, keepdims=True)).ravel()
    m = np.repeat(np.asarray(ms, dtype=float), L.size)
    X = np.column_stack([np.tile(x, len(ms)), np.tile(x, len(ms)) * m])
    return X, y, max(y.size - len(ms), 1)


def _least_squares(X: np.ndarray, y: np.ndarray, dof: int) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of ``y ~ X`` and their standard errors, ``dof`` degrees of freedom left
    before the coefficients' own."""
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    sigma2 = float(((y - X @ coef) ** 2).sum() / max(dof - X.shape[1], 1))
    return coef, np.sqrt(np.diag(sigma2 * np.linalg.pinv(X.T @ X)))


def pass_slopes(contexts: Sequence[int], samples: Sequence[Sequence[float]], ms: Sequence[int]):
    """``(u, w, se_u, se_w)``: the per-pass and per-position seconds per context token of one
    model, from its pass times ``samples[k][r]`` at ``ms[k]`` in rounds of context length
    ``contexts[r]`` (module docstring), both terms fitted."""
    X, y, dof = _design(contexts, samples, ms)
    coef, se = _least_squares(X, y, dof)
    return float(coef[0]), float(coef[1]), float(se[0]), float(se[1])


def significant_slopes(
    contexts: Sequence[int], samples: Sequence[Sequence[float]], ms: Sequence[int]
) -> tuple[float, float, float, float]:
    """:func:`pass_slopes` keeping only the terms at least :data:`SIGNIFICANCE` standard errors
    from 0: the weaker term dropped and the other refitted alone while one is below; a dropped
    term is ``0`` with standard error ``0`` (module docstring)."""
    X, y, dof = _design(contexts, samples, ms)
    kept = [0, 1]
    while kept:
        coef, se = _least_squares(X[:, kept], y, dof)
        t = np.abs(coef) / np.maximum(se, np.finfo(float).tiny)
        weakest = int(np.argmin(t))
        if t[weakest] >= SIGNIFICANCE:
            break
        kept.pop(weakest)
    out = np.zeros(4)
    for j, col in enumerate(kept):
        out[col], out[2 + col] = coef[j], se[j]
    return float(out[0]), float(out[1]), float(out[2]), float(out[3])


def fit_context_cost(
    family: FamilyTiming, names: Sequence[str], curves: Sequence[np.ndarray], unit: float
) -> tuple[ContextCost | None, dict] | None:
    """The :class:`ContextCost` of the models ``names`` (target first; a name without a pass
    timing is a proposer, slope 0) whose ``curves`` are in units of ``unit`` seconds, with
    the fit's own figures (per model the kept slopes in seconds per context token, their
    standard errors and both terms as fitted together; the autoregressive generations' own
    slope as a check). None when the rounds cannot tell a slope; ``(None, figures)`` when no
    model keeps one (module docstring)."""
    L = np.asarray(family.contexts, dtype=float)
    if L.size < 3 or L.max() - L.min() < MIN_SPAN:
        return None
    slopes, record = [], {}
    for name, curve in zip(names, curves, strict=True):
        timing = family.passes.get(name)
        if timing is None or not timing.samples:
            slopes.append(np.zeros(1))
            continue
        u, w, se_u, se_w = significant_slopes(L, timing.samples, timing.m)
        slopes.append((u + w * np.arange(1, len(curve) + 1)) / unit)
        record[name] = {
            "per_pass_s": u,
            "per_position_s": w,
            "stderr": [se_u, se_w],
            "both_terms": list(pass_slopes(L, timing.samples, timing.m)),
        }
    n = np.asarray(family.ar_tokens, dtype=float)
    mid = np.asarray(family.ar_contexts, dtype=float)[: n.size] + n / 2
    ar_tokens = float((n * mid).sum() / n.sum()) if mid.size == n.size else float(L.mean())
    record["autoregressive_direct_s"] = _ar_direct_slope(family, mid)
    record["significance"] = SIGNIFICANCE
    if not any(s.any() for s in slopes):
        return None, record
    cost = ContextCost(
        float(L.mean()),
        ar_tokens,
        float(slopes[0][0]),
        tuple(slopes),
        (float(min(L.min(), mid.min(initial=L.min()))), float(max(L.max(), mid.max(initial=0)))),
    )
    return cost, record


def _ar_direct_slope(family: FamilyTiming, mid: np.ndarray) -> float | None:
    """The autoregressive generations' own seconds per token per context token (weighted by
    their tokens): a check on the target's one-token slope, too noisy over a few rounds to
    price with."""
    n = np.asarray(family.ar_tokens, dtype=float)
    if mid.size != n.size or n.size < 3 or np.ptp(mid) < MIN_SPAN or (n <= 0).any():
        return None
    per_token = np.asarray(family.ar_seconds, dtype=float) / n
    return float(np.polyfit(mid, per_token, 1, w=np.sqrt(n))[0])
