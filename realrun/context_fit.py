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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ewif.files.context_cost import ContextCost
from realrun.timing import FamilyTiming

#: Fewest tokens between the shortest and the longest timed context for a fit.
MIN_SPAN = 32


def pass_slopes(contexts: Sequence[int], samples: Sequence[Sequence[float]], ms: Sequence[int]):
    """``(u, w, se_u, se_w)``: the per-pass and per-position seconds per context token of one
    model, from its pass times ``samples[k][r]`` at ``ms[k]`` in rounds of context length
    ``contexts[r]`` (module docstring)."""
    L = np.asarray(contexts, dtype=float)
    x = L - L.mean()
    Y = np.asarray([list(s)[: L.size] for s in samples], dtype=float)
    if Y.shape != (len(ms), L.size):
        raise ValueError(f"need one pass time per round ({L.size}) at every m, got {Y.shape}")
    y = (Y - Y.mean(axis=1, keepdims=True)).ravel()
    m = np.repeat(np.asarray(ms, dtype=float), L.size)
    X = np.column_stack([np.tile(x, len(ms)), np.tile(x, len(ms)) * m])
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = max(y.size - 2 - len(ms), 1)
    sigma2 = float(((y - X @ coef) ** 2).sum() / dof)
    cov = sigma2 * np.linalg.pinv(X.T @ X)
    return float(coef[0]), float(coef[1]), float(np.sqrt(cov[0, 0])), float(np.sqrt(cov[1, 1]))


def fit_context_cost(
    family: FamilyTiming, names: Sequence[str], curves: Sequence[np.ndarray], unit: float
) -> tuple[ContextCost, dict] | None:
    """The :class:`ContextCost` of the models ``names`` (target first; a name without a pass
    timing is a proposer, slope 0) whose ``curves`` are in units of ``unit`` seconds, with
    the fit's own figures (seconds per context token and their standard errors, and the
    autoregressive generations' own slope as a check); None when the rounds cannot tell a
    slope (module docstring)."""
    L = np.asarray(family.contexts, dtype=float)
    if L.size < 3 or L.max() - L.min() < MIN_SPAN:
        return None
    slopes, record = [], {}
    for name, curve in zip(names, curves, strict=True):
        timing = family.passes.get(name)
        if timing is None or not timing.samples:
            slopes.append(np.zeros(1))
            continue
        u, w, se_u, se_w = pass_slopes(L, timing.samples, timing.m)
        slopes.append((u + w * np.arange(1, len(curve) + 1)) / unit)
        record[name] = {"per_pass_s": u, "per_position_s": w, "stderr": [se_u, se_w]}
    n = np.asarray(family.ar_tokens, dtype=float)
    mid = np.asarray(family.ar_contexts, dtype=float)[: n.size] + n / 2
    ar_tokens = float((n * mid).sum() / n.sum()) if mid.size == n.size else float(L.mean())
    record["autoregressive_direct_s"] = _ar_direct_slope(family, mid)
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
