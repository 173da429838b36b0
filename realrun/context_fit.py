"""c(m, L) from the timing rounds: each pass's cost against its round's context length.

:func:`realrun.timing.time_family` times every model's passes at every ``m`` once a round,
each round on one measuring prompt and a drawn part of its continuation, so the rounds'
context lengths ``L_r`` spread as the measuring prompts' do. For each neural model ``i`` the
pass times ``t_r(m)`` are fitted by least squares to

    t_r(m) = t̄(m) + (L_r − L̄)·(u_i + w_i·m),

one intercept per ``m`` (the curve itself, at the rounds' mean length ``L̄``) and two slopes
per model: ``u_i`` what a longer context adds to every pass (the KV cache's handling; on
transformers on a CPU most of it), ``w_i`` what it adds per position (attention). An
autoregressive token's slope is the timed generations' own: their seconds per token against
their mean context (each generation's prompt plus half its tokens), weighted by their
tokens (:func:`ar_slope`), referred to that mean context — the unit measured directly, and
far more precisely than through single passes (each generation averages its 32 tokens: on
SmolLM2 over contexts of 62–774 tokens, 31.1 ± 0.8 µs per context token, where the target's
per-pass slope alone was 31.8 ± 6.7 µs). Where the generations' slope is not significant
(:data:`SIGNIFICANCE` standard errors), the target's ``u_0 + w_0`` stands in. In the
curves' unit (seconds over ``t_AR``) this is :class:`ewif.files.context_cost.ContextCost`.
With fewer than three rounds, or contexts spanning fewer than :data:`MIN_SPAN` tokens, the
slope cannot be told from noise and no fit is made (one curve for every context, as before).

Only slopes the rounds can tell from noise are kept: a model's two slopes are priced when
their Wald statistic ``β'·Cov⁻¹·β`` reaches :data:`WALD_THRESHOLD` (a joint test at 5 %;
the two columns ``L − L̄`` and ``(L − L̄)·m`` are strongly correlated, so each term alone
can look insignificant while together they are clear), and are 0 otherwise. Eight rounds of
a 135M model's 25 ms passes on a shared 2-core machine gave slopes of either sign at a fifth
of a standard error, which priced a 143-token context 38 % off the run's AR; with no slope
kept, the AR token's included, no fit is made.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ewif.files.context_cost import ContextCost
from realrun.pass_timing import FamilyTiming

#: Fewest tokens between the shortest and the longest timed context for a fit.
MIN_SPAN = 32


#: A model's two slopes are kept only when their Wald statistic ``β'·Cov⁻¹·β`` is at least this:
#: the 95 % quantile of χ² with 2 degrees of freedom (a joint test at 5 %).
WALD_THRESHOLD = 5.991
#: Standard errors the AR generations' slope must be away from 0 to be kept (about 5 %).
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
    """Coefficients of ``y ~ X`` and their covariance, ``dof`` degrees of freedom left before
    the coefficients' own."""
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    sigma2 = float(((y - X @ coef) ** 2).sum() / max(dof - X.shape[1], 1))
    return coef, sigma2 * np.linalg.pinv(X.T @ X)


def pass_slopes(contexts: Sequence[int], samples: Sequence[Sequence[float]], ms: Sequence[int]):
    """``(u, w, se_u, se_w, wald)``: the per-pass and per-position seconds per context token
    of one model, from its pass times ``samples[k][r]`` at ``ms[k]`` in rounds of context
    length ``contexts[r]`` (module docstring), their standard errors and the Wald statistic
    of the two together."""
    X, y, dof = _design(contexts, samples, ms)
    coef, cov = _least_squares(X, y, dof)
    se = np.sqrt(np.diag(cov))
    wald = float(coef @ np.linalg.pinv(cov) @ coef) if (se > 0).all() else float("inf")
    return float(coef[0]), float(coef[1]), float(se[0]), float(se[1]), wald


def fit_context_cost(
    family: FamilyTiming, names: Sequence[str], curves: Sequence[np.ndarray], unit: float
) -> tuple[ContextCost | None, dict] | None:
    """The :class:`ContextCost` of the models ``names`` (target first; a name without a pass
    timing is a proposer, slope 0) whose ``curves`` are in units of ``unit`` seconds, with
    the fit's own figures (per model both slopes as fitted, in seconds per context token,
    their standard errors, their Wald statistic and whether they are kept; the
    autoregressive generations' own slope and where the AR token's slope came from). None
    when the rounds cannot tell a slope; ``(None, figures)`` when no slope is kept (module
    docstring)."""
    L = np.asarray(family.contexts, dtype=float)
    if L.size < 3 or L.max() - L.min() < MIN_SPAN:
        return None
    slopes, record = [], {}
    for name, curve in zip(names, curves, strict=True):
        timing = family.passes.get(name)
        if timing is None or not timing.samples:
            slopes.append(np.zeros(1))
            continue
        u, w, se_u, se_w, wald = pass_slopes(L, timing.samples, timing.m)
        kept = wald >= WALD_THRESHOLD
        slopes.append((u + w * np.arange(1, len(curve) + 1)) / unit * kept)
        record[name] = {
            "per_pass_s": u,
            "per_position_s": w,
            "stderr": [se_u, se_w],
            "wald": wald,
            "kept": kept,
        }
    n = np.asarray(family.ar_tokens, dtype=float)
    mid = np.asarray(family.ar_contexts, dtype=float)[: n.size] + n / 2
    ar_tokens = float((n * mid).sum() / n.sum()) if mid.size == n.size else float(L.mean())
    direct = ar_slope(family, mid)
    record["autoregressive_direct_s"] = None if direct is None else direct[0]
    record["autoregressive_direct_stderr"] = None if direct is None else direct[1]
    own = direct is not None and abs(direct[0]) > SIGNIFICANCE * direct[1]
    record["ar_slope_from"] = "autoregressive generations" if own else "target one-token pass"
    record["significance"] = {"wald": WALD_THRESHOLD, "ar_stderrs": SIGNIFICANCE}
    unit_slope = direct[0] / unit if own and direct is not None else float(slopes[0][0])
    if unit_slope == 0.0 and not any(s.any() for s in slopes):
        return None, record
    cost = ContextCost(
        float(L.mean()),
        ar_tokens,
        unit_slope,
        tuple(slopes),
        (float(min(L.min(), mid.min(initial=L.min()))), float(max(L.max(), mid.max(initial=0)))),
    )
    return cost, record


def ar_slope(family: FamilyTiming, mid: np.ndarray) -> tuple[float, float] | None:
    """``(slope, standard error)``: the autoregressive generations' seconds per token per
    context token, by least squares weighted by their tokens over their mean contexts
    ``mid`` (module docstring); None with fewer than three generations, contexts spanning
    fewer than :data:`MIN_SPAN` tokens, or an empty one."""
    n = np.asarray(family.ar_tokens, dtype=float)
    if mid.size != n.size or n.size < 3 or np.ptp(mid) < MIN_SPAN or (n <= 0).any():
        return None
    per_token = np.asarray(family.ar_seconds, dtype=float) / n
    X = np.column_stack([np.ones(n.size), mid - mid.mean()]) * np.sqrt(n)[:, None]
    coef, cov = _least_squares(X, per_token * np.sqrt(n), n.size)
    return float(coef[1]), float(np.sqrt(cov[1, 1]))
