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
usually far more precisely than through single passes (each generation averages its 32
tokens: on SmolLM2 over contexts of 62–774 tokens, 31.1 ± 0.8 µs per context token, where the
target's per-pass slope alone was 31.8 ± 6.7 µs). The target's one-token pass slope
``u_0 + w_0`` estimates the same thing (an AR token is that pass); where the target's slopes are
kept, the two estimates are combined by their precision (inverse-variance weights, the
stand-in's variance ``var u_0 + var w_0 + 2 cov``), and the AR token's slope is priced only
where the combination is :data:`SIGNIFICANCE` standard errors from 0 (0 otherwise). A stand-in
taken alone whenever the generations' slope was not significant priced the target's
``u_0 = 154 ± 194`` µs — noise, kept because its ``w_0`` was clear — and moved a Qwen run's unit
+35 %. In the curves' unit (seconds over ``t_AR``) this is
:class:`ewif.files.context_cost.ContextCost`.
With fewer than three rounds, or contexts spanning fewer than :data:`MIN_SPAN` tokens, the
slope cannot be told from noise and no fit is made (one curve for every context, as before).

Only slopes the rounds can tell from noise are kept: a model's two slopes are priced when
their Wald statistic ``β'·Cov⁻¹·β`` reaches :data:`WALD_THRESHOLD` (a joint test at 5 %;
the two columns ``L − L̄`` and ``(L − L̄)·m`` are strongly correlated, so each term alone
can look insignificant while together they are clear), and are 0 otherwise. Eight rounds of
a 135M model's 25 ms passes on a shared 2-core machine gave slopes of either sign at a fifth
of a standard error, which priced a 143-token context 38 % off the run's AR; with no slope
kept, the AR token's included, no fit is made. A kept pair is then priced at each size ``m``
only where ``u + w·m`` is itself :data:`SIGNIFICANCE` standard errors from 0 (its variance
``var u + m²·var w + 2m·cov``): the joint test can be carried by the large sizes alone. On
llama.cpp a Qwen 0.5B's pair (``u = 65 ± 57``, ``w = 3.8 ± 4.9`` µs, Wald 8.9) priced its
one-position pass 5.6 ms dearer at held-out contexts 81 tokens longer — the run paid 12 %
less than timed, not 22 % more.
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
    (u, w), se, wald, _ = _slopes_with_covariance(contexts, samples, ms)
    return u, w, float(se[0]), float(se[1]), wald


def _slopes_with_covariance(contexts, samples, ms):
    """``((u, w), standard errors, wald, covariance)`` of :func:`pass_slopes`."""
    X, y, dof = _design(contexts, samples, ms)
    coef, cov = _least_squares(X, y, dof)
    se = np.sqrt(np.diag(cov))
    wald = float(coef @ np.linalg.pinv(cov) @ coef) if (se > 0).all() else float("inf")
    return (float(coef[0]), float(coef[1])), se, wald, cov


def combined_slope(estimates: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """``(slope, standard error)``: the inverse-variance weighted mean of independent
    ``(estimate, standard error)`` pairs (one with standard error 0 is exact and taken
    alone); ``(0, inf)`` with none."""
    exact = [e for e, se in estimates if se == 0]
    if exact:
        return exact[0], 0.0
    finite = [(e, se) for e, se in estimates if np.isfinite(se)]
    if not finite:
        return 0.0, float("inf")
    values, errors = np.asarray(finite).T
    weights = 1 / errors**2
    return float((weights * values).sum() / weights.sum()), float(1 / np.sqrt(weights.sum()))


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
    slopes, record, stand_in = [], {}, None
    for k, (name, curve) in enumerate(zip(names, curves, strict=True)):
        timing = family.passes.get(name)
        if timing is None or not timing.samples:
            slopes.append(np.zeros(1))
            continue
        (u, w), se, wald, cov = _slopes_with_covariance(L, timing.samples, timing.m)
        kept = wald >= WALD_THRESHOLD
        slope, slope_se = _slope_by_size(u, w, cov, len(curve))
        priced = kept & (np.abs(slope) > SIGNIFICANCE * slope_se)
        slopes.append(slope / unit * priced)
        if k == 0 and kept:  # the target's one-token pass: its slope at m = 1
            stand_in = (float(slope[0]), float(slope_se[0]))
        record[name] = {
            "per_pass_s": u,
            "per_position_s": w,
            "stderr": [float(se[0]), float(se[1])],
            "wald": wald,
            "kept": kept,
            "sizes_priced": int(priced.sum()),
        }
    n = np.asarray(family.ar_tokens, dtype=float)
    mid = np.asarray(family.ar_contexts, dtype=float)[: n.size] + n / 2
    ar_tokens = float((n * mid).sum() / n.sum()) if mid.size == n.size else float(L.mean())
    direct = ar_slope(family, mid)
    record["autoregressive_direct_s"] = None if direct is None else direct[0]
    record["autoregressive_direct_stderr"] = None if direct is None else direct[1]
    record["target_one_token_s"] = None if stand_in is None else stand_in[0]
    record["target_one_token_stderr"] = None if stand_in is None else stand_in[1]
    slope, se = combined_slope([e for e in (direct, stand_in) if e is not None])
    kept = abs(slope) > SIGNIFICANCE * se
    record["ar_slope_s"], record["ar_slope_stderr"] = slope, se
    record["ar_slope_from"] = _source(direct, stand_in) if kept else "none significant"
    record["significance"] = {"wald": WALD_THRESHOLD, "ar_stderrs": SIGNIFICANCE}
    unit_slope = slope / unit if kept else 0.0
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


def _slope_by_size(u: float, w: float, cov: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(u + w·m, its standard error)`` for ``m = 1..n``: the slope at each size and
    ``√(var u + m²·var w + 2m·cov)``."""
    m = np.arange(1, n + 1)
    se = np.sqrt(np.maximum(cov[0, 0] + m**2 * cov[1, 1] + 2 * m * cov[0, 1], 0.0))
    return u + w * m, se


def _source(direct, stand_in) -> str:
    """Which estimates the AR token's slope was combined from (:func:`fit_context_cost`)."""
    if direct is not None and stand_in is not None and direct[1] > 0 and stand_in[1] > 0:
        return "autoregressive generations and target one-token pass, by precision"
    if direct is not None and (stand_in is None or direct[1] == 0):
        return "autoregressive generations"
    return "target one-token pass"


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
