"""Measure what ewif needs on real models: acceptance α[r][j] and cost coefficients c_i(m).

Everything is written as one ``csd.models/1`` model set (:mod:`ewif.io`), which
``csd recommend --from FILE`` and ``csd realrun`` read.

Acceptance (teacher-forced on the **target's** continuations)
-------------------------------------------------------------
For every prompt the target generates a continuation ``y_1..y_T`` (greedy, or sampled with
the run's decoding). Every model then runs once over ``prompt + y`` and every pair
``r < j`` (``r`` neural) is scored at each position ``t`` on the same prefix
``prompt + y_{<t}`` — the prefixes the cascade visits at its first draft position
(a reviewer that is itself a drafter also works on the target's text inside a cascade, so
this is closer to a cascade than the reviewer's own continuation). Per position:

* greedy: ``a_t = 1`` iff drafter ``j``'s proposal ``x`` (its argmax; Max-Gram's
  ``propose(prefix, P, 1)``) passes reviewer ``r``'s greedy test with lenience ``l``,
  ``z_r(x) + log l >= max z_r`` (raw logits; ``l = 1``: ``x`` is ``r``'s argmax) — exactly
  :func:`simulate.tokens.review.greedy_review`;
* sampling: ``a_t = Σ_x min(q_j(x), l·p_r(x))`` with ``p, q`` the decoded (temperature,
  top-p) distributions — the acceptance probability of speculative sampling with lenience,
  ``1 − TV(p, q)`` at ``l = 1``; for Max-Gram (point mass at ``x``) ``min(1, l·p_r(x))``.

``α[l][r][j]`` is the mean of ``a_t`` over all positions of all prompts. The target's row
uses ``l = 1`` for every lenience (lenience never applies at the target).

Acceptance by position (Figure 2). Because an accepted greedy draft equals the reviewer's
text, draft position ``i`` starting at ``t`` is accepted given positions ``1..i−1`` were iff
``a_{t+i−1}`` holds; so ``curve[i] = Σ_t Π_{s<i} a_{t+s} / Σ_t Π_{s<i−1} a_{t+s}`` (starts
with ``t + i − 1 < T``) is the conditional acceptance of position ``i`` (for sampling the
same formula is the i.i.d.-in-context approximation). Stored for lenience 1.

Costs
-----
Each neural model is timed on one context (the first prompt and its continuation): after
``warmup`` untimed passes, ``repeats`` rounds of passes feeding ``m = 1..max_m`` fresh
tokens onto the cached context and returning ``m`` logit rows (a review of ``m − 1``
drafts: forward + LM head on ``m`` rows + copy to host + cache crop), the ``m`` values in a
shuffled order per round. The fastest time per ``m`` is fitted to the affine model
``t_i(m) = a_i + b_i·m`` *anchored at m = 1* (exact for the one-token pass: autoregressive
decoding, leaf drafters and EWIF's normalisation), the slope by least squares over
``m >= 2``. On CPUs the true curve is not affine (BLAS switches kernels: cost grows about
linearly up to m ≈ 4 and flattens after), so reviews of long drafts are over-charged and
short ones under-charged; see the README's "Predictions versus measurements". The model
set stores ``cost[i] = a_i / a_0`` and ``cost_per_token[i] = b_i / a_0`` (``cost[0] = 1``
as the format requires); a pass of ``m`` positions then costs ``cost + cost_per_token·m``
target intercepts, and ewif's EWIF is scale-free (it divides by the target's one-token
pass ``1 + cost_per_token[0]``).
Max-Gram's ``propose(·, ·, k)`` is timed for ``k = 1..max_m`` the same way; its cost is the
time per proposed token at ``k = max_m`` over ``a_0`` (``cost_per_token`` 0), because ewif
charges a leaf block of ``k`` tokens as ``k`` passes.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from ewif import _validate
from ewif.io import ModelSet
from simulate.tokens.cascade import CascadeDecoder
from simulate.tokens.interface import Proposer, TokenModel
from simulate.tokens.sampling import Decoding


@dataclass(frozen=True)
class AffineFit:
    """``seconds(m) ≈ intercept + slope·m`` fitted to per-``m`` fastest times."""

    m: tuple[int, ...]
    seconds: tuple[float, ...]
    intercept: float
    slope: float
    r2: float

    def __call__(self, m: float) -> float:
        return self.intercept + self.slope * m

    def to_dict(self) -> dict:
        return {"m": list(self.m), "seconds": list(self.seconds),
                "intercept_s": self.intercept, "slope_s_per_token": self.slope, "r2": self.r2}


def fit_affine(m: Sequence[int], seconds: Sequence[float], anchored: bool = False) -> AffineFit:
    """Least-squares line through ``(m, seconds)``; a negative slope (noise) becomes 0.

    ``anchored=True``: the line passes exactly through the first point ``(m_0, t_0)`` and
    the slope minimises the squared error of the others, ``b = Σ (m−m_0)(t−t_0) /
    Σ (m−m_0)²``. ``r2`` is the coefficient of determination (1 for a constant series)."""
    x = np.asarray(m, dtype=float)
    y = np.asarray(seconds, dtype=float)
    if x.size < 1 or x.shape != y.shape:
        raise ValueError(f"m and seconds must be equal-length non-empty, got {x.size}, {y.size}")
    if anchored:
        dx, dy = x[1:] - x[0], y[1:] - y[0]
        slope = float(dx @ dy / (dx @ dx)) if dx.size and (dx @ dx) > 0 else 0.0
    else:
        slope = float(np.polyfit(x, y, 1)[0]) if x.size > 1 and np.ptp(x) > 0 else 0.0
    slope = max(slope, 0.0)
    intercept = float(y[0] - slope * x[0]) if anchored else float(np.mean(y - slope * x))
    resid = float(np.sum((y - intercept - slope * x) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - resid / total if total > 0 else 1.0
    return AffineFit(tuple(int(v) for v in x), tuple(float(v) for v in y), intercept, slope, r2)


def time_model(model: TokenModel, context: Sequence[int], max_m: int, repeats: int = 5,
               warmup: int = 3, seed: int = 0) -> AffineFit:
    """Affine fit of one pass of ``model`` feeding ``m = 1..max_m`` tokens after ``context``.

    Each ``m`` is timed ``repeats`` times (in shuffled order) and represented by its fastest
    run: on a shared machine interference only ever adds time, so the minimum is the
    stable estimate of a pass's cost (the median let load spikes at large ``m`` tilt the
    line until the fitted intercept went negative)."""
    max_m = _validate.count("max_m", max_m, minimum=1)
    repeats = _validate.count("repeats", repeats, minimum=1)
    warmup = _validate.count("warmup", warmup)
    rng = random.Random(seed)
    ctx = [int(t) for t in context]
    if not ctx:
        raise ValueError("context must hold at least one token")
    vocab = model.vocab_size
    model.logits(ctx, 1)
    for _ in range(warmup):
        model.logits(ctx + [rng.randrange(vocab) for _ in range(max_m)], max_m)
    times: dict[int, list[float]] = {m: [] for m in range(1, max_m + 1)}
    for _ in range(repeats):
        order = list(times)
        rng.shuffle(order)
        for m in order:
            model.logits(ctx, 1)  # back to the context (a crop), untimed
            fresh = ctx + [rng.randrange(vocab) for _ in range(m)]
            start = time.perf_counter()
            model.logits(fresh, m)
            times[m].append(time.perf_counter() - start)
    ms = sorted(times)
    return fit_affine(ms, [min(times[m]) for m in ms], anchored=True)


def time_proposer(proposer: Proposer, context: Sequence[int], prompt_length: int, max_m: int,
                  repeats: int = 5) -> AffineFit:
    """Affine fit of one ``propose(context, prompt_length, k)`` call, ``k = 1..max_m``
    (fastest of ``repeats`` runs per ``k``, as in :func:`time_model`)."""
    ctx = [int(t) for t in context]
    times: dict[int, list[float]] = {k: [] for k in range(1, max_m + 1)}
    proposer.propose(ctx, prompt_length, max_m)
    for _ in range(repeats):
        for k in times:
            start = time.perf_counter()
            proposer.propose(ctx, prompt_length, k)
            times[k].append(time.perf_counter() - start)
    ks = sorted(times)
    return fit_affine(ks, [min(times[k]) for k in ks])


def position_curve(runs: Sequence[np.ndarray], max_position: int) -> np.ndarray:
    """Conditional acceptance by draft position from per-position acceptances ``a_t`` of each
    sequence (see the module docstring); NaN where no start reaches the position."""
    num = np.zeros(max_position)
    den = np.zeros(max_position)
    for a in runs:
        a = np.asarray(a, dtype=float)
        T = a.size
        prod = np.ones(T)  # Π_{s<i-1} a_{t+s} for the current i, per start t
        for i in range(1, max_position + 1):
            starts = T - i + 1
            if starts <= 0:
                break
            den[i - 1] += prod[:starts].sum()
            prod = prod[:starts] * a[i - 1 : i - 1 + starts]
            num[i - 1] += prod.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _acceptances(
    models: Sequence[TokenModel | Proposer],
    prompt: list[int],
    continuation: list[int],
    leniences: Sequence[float],
    decoding: Decoding,
) -> dict[tuple[float, int, int], np.ndarray]:
    """Per-position acceptance ``a_t`` of every pair on one teacher-forced continuation."""
    T = len(continuation)
    seq = prompt + continuation
    logits: dict[int, np.ndarray] = {}
    proposals: dict[int, np.ndarray] = {}
    for i, m in enumerate(models):
        if isinstance(m, TokenModel):
            logits[i] = np.asarray(m.logits(seq, T + 1)[:T], dtype=np.float64)
            proposals[i] = np.argmax(logits[i], axis=-1)
        else:
            proposals[i] = np.array(
                [m.propose(seq[: len(prompt) + t], len(prompt), 1)[0] for t in range(T)]
            )
    probs = {} if decoding.greedy else {i: decoding.probs(z) for i, z in logits.items()}
    rows = np.arange(T)
    out = {}
    for r, z in logits.items():
        top = z.max(axis=-1)
        for j in range(r + 1, len(models)):
            for lenience in leniences if r > 0 else (1.0,):
                if decoding.greedy:
                    a = (z[rows, proposals[j]] + math.log(lenience) >= top).astype(float)
                elif j in probs:
                    a = np.minimum(probs[j], lenience * probs[r]).sum(axis=-1)
                else:
                    a = np.minimum(1.0, lenience * probs[r][rows, proposals[j]])
                out[(float(lenience), r, j)] = a
    return out


def measure(
    models: Sequence[TokenModel | Proposer],
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int = 64,
    leniences: Sequence[float] = (1.0, 2.0, 3.0, 5.0),
    max_m: int = 12,
    repeats: int = 5,
    warmup: int = 3,
    decoding: Decoding | None = None,
    eos_token_id: int | None = None,
    max_position: int = 16,
    seed: int = 0,
    progress: bool = True,
) -> ModelSet:
    """Measure α (all pairs, all ``leniences``), acceptance by position and costs of
    ``models = [target, d1, ..., dn]`` (TokenModels, Proposers only after them) over
    ``prompts`` (token-id lists); returns the model set (see the module docstring).

    Ctrl-C during the acceptance pass keeps the prompts finished so far (at least one)."""
    models = list(models)
    if len(models) < 2:
        raise ValueError(f"models must be [target, at least one drafter], got {len(models)}")
    if not isinstance(models[0], TokenModel):
        raise ValueError(f"models[0] (the target) must be a TokenModel, got {models[0]!r}")
    for i, m in enumerate(models):
        if not isinstance(m, (TokenModel, Proposer)):
            raise TypeError(f"models[{i}] must be a TokenModel or Proposer, got {type(m).__name__}")
    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ValueError(f"model names must be distinct, got {names}")
    vocab = {m.vocab_size for m in models}
    if len(vocab) != 1:
        raise ValueError(
            "models must share one vocabulary: vocab sizes "
            + ", ".join(f"{m.name}={m.vocab_size}" for m in models)
        )
    if not prompts:
        raise ValueError("prompts must hold at least one prompt")
    prompts = [[int(t) for t in p] for p in prompts]
    for i, p in enumerate(prompts):
        if not p:
            raise ValueError(f"prompts[{i}] is empty; every prompt needs at least one token")
    lens = sorted({float(_validate._real("lenience", x)) for x in leniences} | {1.0})
    if lens[0] < 1.0:
        raise ValueError(f"leniences must be >= 1, got {lens[0]!r}")
    decoding = Decoding() if decoding is None else decoding
    max_new_tokens = _validate.count("max_new_tokens", max_new_tokens, minimum=1)
    max_m = _validate.count("max_m", max_m, minimum=1)

    generator = CascadeDecoder([models[0]], np.zeros((0, 0), int), decoding=decoding, seed=seed)
    runs: dict[tuple[float, int, int], list[np.ndarray]] = {}
    contexts: list[tuple[list[int], list[int]]] = []
    try:
        for p in tqdm(prompts, desc="measure α", unit="prompt", disable=not progress):
            cont = generator.generate(p, max_new_tokens, eos_token_id).tokens
            if not cont:
                continue
            for key, a in _acceptances(models, p, cont, lens, decoding).items():
                runs.setdefault(key, []).append(a)
            contexts.append((p, cont))
    except KeyboardInterrupt:
        if not contexts:
            raise
    if not contexts:
        raise ValueError("the target generated no tokens on any prompt; nothing to measure")

    n1 = len(models)
    alpha = {}
    for lenience in lens:
        mat = np.full((n1, n1), np.nan)
        for (l_, r, j), arrs in runs.items():
            if l_ == lenience or (r == 0 and l_ == 1.0):
                mat[r, j] = float(np.concatenate(arrs).mean())
        alpha[lenience] = mat
    by_position = {
        (r, j): position_curve(arrs, max_position)
        for (l_, r, j), arrs in runs.items()
        if l_ == 1.0
    }
    by_position = {k: np.nan_to_num(v, nan=0.0) for k, v in by_position.items()}

    ctx_prompt, ctx_cont = contexts[0]
    context = ctx_prompt + ctx_cont
    fits: dict[str, AffineFit] = {}
    for m in tqdm(models, desc="measure cost", unit="model", disable=not progress):
        if isinstance(m, TokenModel):
            fits[m.name] = time_model(m, context, max_m, repeats, warmup, seed)
        else:
            fits[m.name] = time_proposer(m, context, len(ctx_prompt), max_m, repeats)
    a0 = fits[names[0]].intercept
    if a0 <= 0:
        raise ValueError(f"the target's fitted pass intercept must be > 0, got {a0!r} s")
    cost, cpt = [], []
    for m in models:
        f = fits[m.name]
        if isinstance(m, TokenModel):
            cost.append(max(f.intercept, 0.0) / a0)
            cpt.append(f.slope / a0)
        else:
            cost.append(f(max_m) / max_m / a0)
            cpt.append(0.0)
    cost[0] = 1.0
    positions = sum(len(c) for _, c in contexts)
    metadata = {
        "source": "realrun.measure",
        "acceptance": "teacher-forced on the target's continuations"
        + (" (greedy)" if decoding.greedy else f" (sampling T={decoding.temperature:g}, "
           f"top_p={decoding.top_p:g}; 1 - TV with lenience)"),
        "decoding": {"temperature": decoding.temperature, "top_p": decoding.top_p},
        "prompts": len(contexts),
        "positions": positions,
        "max_new_tokens": max_new_tokens,
        "cost_model": "pass(m) = cost + cost_per_token*m in units of the target's fitted "
        "intercept a_0; MaG: seconds per proposed token at k = max_m",
        "target_one_token_pass_s": fits[names[0]](1),
        "timing": {name: f.to_dict() for name, f in fits.items()},
        "timing_context_tokens": len(context),
        "repeats": repeats,
        "warmup": warmup,
    }
    return ModelSet(
        models=tuple(names),
        cost=np.asarray(cost),
        cost_per_token=np.asarray(cpt),
        alpha=alpha,
        alpha_by_position=by_position,
        metadata=metadata,
    )
