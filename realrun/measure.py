"""Measure what ewif needs on real models: acceptance α[r][j] and cost coefficients c_i(m).

Everything is written as one ``csd.models/3`` model set (:mod:`ewif.io`), which
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
  :func:`simulate.decoder.verify.greedy_verify`;
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

Costs (:mod:`realrun.timing`)
-----------------------------
Each neural model is timed on one context of realistic length (the measuring prompt and
continuation of median total length): decoding-like passes that roll back a rejected tail
and feed ``m`` fresh positions onto the cached context, mean of repeats (with its standard
error) after a warm-up, for ``m = 1..max_m`` (a grid, linearly interpolated). The model
set stores each model's **cost curve** ``cost_curve[i][m-1] = t_i(m) / t_0(1)`` — in units
of the target's one-token pass, so ``cost_curve[0][0] = 1`` — and ewif prices every pass at
the size it really has (beyond ``max_m`` ewif extends a curve linearly through its last two
points, never downwards). Max-Gram's curve is one point, its seconds per proposed token
over ``t_0(1)``: a leaf block of ``k`` tokens is ``k`` generating passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from tqdm.auto import tqdm

from ewif import validate
from ewif.bootstrap import BootstrapData
from ewif.io import ModelSet
from realrun.timing import PassTiming, time_passes, time_proposer
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.sampling import Decoding


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


@dataclass(frozen=True)
class Acceptance:
    """Step 1 of :func:`measure`: per-position acceptances of every pair and lenience
    (``runs[(lenience, r, j)]``, one array per prompt) and the target's continuations."""

    runs: dict[tuple[float, int, int], list[np.ndarray]]
    contexts: list[tuple[list[int], list[int]]]  # (prompt, continuation) per prompt
    decoding: Decoding
    max_new_tokens: int

    def alpha(self, n_models: int) -> dict[float, np.ndarray]:
        """``α[l][r, j]``: mean acceptance over all positions; the target row uses ``l = 1``."""
        leniences = sorted({key[0] for key in self.runs})
        alpha = {}
        for lenience in leniences:
            mat = np.full((n_models, n_models), np.nan)
            for (l_, r, j), arrs in self.runs.items():
                if l_ == lenience or (r == 0 and l_ == 1.0):
                    mat[r, j] = float(np.concatenate(arrs).mean())
            alpha[lenience] = mat
        return alpha

    def by_prompt(self) -> dict[tuple[float, int, int], np.ndarray]:
        """Per pair and lenience, one ``[Σ_t a_t, T]`` row per prompt: the evidence the
        bootstrap over prompts resamples (:mod:`ewif.bootstrap`)."""
        return {
            key: np.array([[float(a.sum()), a.size] for a in arrs])
            for key, arrs in self.runs.items()
        }

    def typical_context(self) -> tuple[list[int], list[int]]:
        """The ``(prompt, continuation)`` of median total length: the context the cost
        curves are timed on (attention cost grows with the context)."""
        order = sorted(self.contexts, key=lambda c: len(c[0]) + len(c[1]))
        return order[(len(order) - 1) // 2]

    def by_position(self, max_position: int) -> dict[tuple[int, int], np.ndarray]:
        """Conditional acceptance by draft position at lenience 1 (:func:`position_curve`)."""
        return {
            (r, j): np.nan_to_num(position_curve(arrs, max_position), nan=0.0)
            for (l_, r, j), arrs in self.runs.items()
            if l_ == 1.0
        }


@dataclass(frozen=True)
class Costs:
    """Step 2 of :func:`measure`: the timings of every model and their relative curves."""

    timings: dict[str, PassTiming | float]  # neural: PassTiming; Max-Gram: s per token
    curves: tuple[np.ndarray, ...]  # cost_curve[i][m-1] in target one-token passes
    context_tokens: int
    repeats: int
    warmup: int
    extra: dict = field(default_factory=dict)

    @property
    def target_pass_seconds(self) -> float:
        """``t_0(1)``: the target's one-token pass, the unit of the curves."""
        first = next(iter(self.timings.values()))
        return first.seconds[0]

    def merged(self, more: Costs) -> Costs:
        """These costs with ``more`` rounds of the same passes added (same models, grid and
        context): neural timings pool their repeats, a proposer's per-token times average."""
        if list(self.timings) != list(more.timings) or self.context_tokens != more.context_tokens:
            raise ValueError(
                f"can merge only costs of the same models on the same context, got "
                f"{list(self.timings)} ({self.context_tokens} tokens) and "
                f"{list(more.timings)} ({more.context_tokens} tokens)"
            )
        timings: dict[str, PassTiming | float] = {
            name: t.merged(more.timings[name])
            if isinstance(t, PassTiming)
            else (t + more.timings[name]) / 2
            for name, t in self.timings.items()
        }
        return replace(
            self,
            timings=timings,
            curves=relative_curves(timings),
            repeats=self.repeats + more.repeats,
        )

    def curve_stderr(self) -> tuple[np.ndarray, ...]:
        """Standard error of every point of :attr:`curves` (same units; 0 for a proposer,
        whose per-token time is not repeated), interpolated like the curves."""
        unit = self.target_pass_seconds
        out = []
        for t, curve in zip(self.timings.values(), self.curves, strict=True):
            timed = isinstance(t, PassTiming) and t.stderr
            se = np.interp(np.arange(1, t.m[-1] + 1), t.m, t.stderr) / unit if timed else None
            out.append(np.zeros(curve.size) if se is None else se)
        return tuple(out)


def measure_acceptance(
    models: Sequence[TokenModel | Proposer],
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    leniences: Sequence[float],
    decoding: Decoding,
    eos_token_id: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> Acceptance:
    """Teacher-forced acceptances of every pair on the target's continuations (module
    docstring). Ctrl-C keeps the prompts finished so far (at least one)."""
    lens = sorted({float(x) for x in leniences} | {1.0})
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
    return Acceptance(runs, contexts, decoding, max_new_tokens)


def measure_costs(
    models: Sequence[TokenModel | Proposer],
    context: tuple[Sequence[int], Sequence[int]],
    *,
    max_m: int,
    repeats: int = 5,
    warmup: int = 1,
    seed: int = 0,
    progress: bool = True,
) -> Costs:
    """Pass-cost curves of every model on one ``(prompt, continuation)`` context (module
    docstring); Max-Gram is timed proposing ``max_m`` tokens."""
    prompt, continuation = ([int(t) for t in x] for x in context)
    full = prompt + continuation
    timings: dict[str, PassTiming | float] = {}
    for m in tqdm(models, desc="measure cost", unit="model", disable=not progress):
        if isinstance(m, TokenModel):
            timings[m.name] = time_passes(m, full, max_m, repeats, warmup, seed)
        else:
            timings[m.name] = time_proposer(m, full, len(prompt), max_m)
    return Costs(timings, relative_curves(timings), len(full), repeats, warmup)


def relative_curves(timings: dict[str, PassTiming | float]) -> tuple[np.ndarray, ...]:
    """Every model's dense cost curve in units of the target's (first) one-token pass."""
    unit = next(iter(timings.values())).seconds[0]
    if unit <= 0:
        raise ValueError(f"the target's one-token pass must take > 0 s, got {unit!r} s")
    return tuple(
        (t.dense() if isinstance(t, PassTiming) else np.array([t])) / unit for t in timings.values()
    )


def assemble_model_set(
    names: Sequence[str],
    acceptance: Acceptance,
    costs: Costs,
    *,
    max_position: int = 16,
    metadata: dict | None = None,
) -> ModelSet:
    """Step 3 of :func:`measure`: the ``csd.models/3`` model set of ``names`` (target first)."""
    decoding = acceptance.decoding
    curves = costs.curves
    meta = {
        "source": "realrun.measure",
        "acceptance": "teacher-forced on the target's continuations"
        + (
            " (greedy)"
            if decoding.greedy
            else f" (sampling T={decoding.temperature:g}, "
            f"top_p={decoding.top_p:g}; 1 - TV with lenience)"
        ),
        "decoding": {"temperature": decoding.temperature, "top_p": decoding.top_p},
        "prompts": len(acceptance.contexts),
        "positions": sum(len(c) for _, c in acceptance.contexts),
        "max_new_tokens": acceptance.max_new_tokens,
        "cost_model": "cost_curve[i][m-1] = seconds of a pass of model i over m positions / "
        "seconds of the target's one-token pass (mean of repeats, m on a grid, linear in "
        "between); Max-Gram: seconds per proposed token",
        "target_one_token_pass_s": costs.target_pass_seconds,
        "timing": {
            name: (t.to_dict() if isinstance(t, PassTiming) else {"seconds_per_token": t})
            for name, t in costs.timings.items()
        },
        "timing_context_tokens": costs.context_tokens,
        "repeats": costs.repeats,
        "warmup": costs.warmup,
        **costs.extra,
        **(metadata or {}),
    }
    return ModelSet(
        models=tuple(names),
        cost=np.array([c[0] for c in curves]),
        cost_per_token=np.zeros(len(curves)),
        alpha=acceptance.alpha(len(names)),
        alpha_by_position=acceptance.by_position(max_position),
        metadata=meta,
        cost_curve=curves,
        catch_up=catch_up_flags(costs),
        bootstrap=BootstrapData(acceptance.by_prompt(), costs.curve_stderr())
        if len(acceptance.contexts) >= 2
        else None,
    )


def catch_up_flags(costs: Costs) -> tuple[bool, ...]:
    """Every KV-cached drafter (a timed token model) pays its catch-up pass
    (:mod:`ewif.catch_up`), as the decoder feeds it; proposers (Max-Gram, bigram) do not, and
    the target's flag changes nothing (False)."""
    flags = [isinstance(t, PassTiming) for t in costs.timings.values()]
    return (False, *flags[1:])


def check_models(models: Sequence[TokenModel | Proposer]) -> list[str]:
    """The names of ``models = [target, d1, ..., dn]`` after checking the family: a
    TokenModel target, TokenModels/Proposers after it, distinct names, one vocabulary."""
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
    return names


def measure(
    models: Sequence[TokenModel | Proposer],
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int = 64,
    leniences: Sequence[float] = (1.0, 2.0, 3.0, 5.0),
    max_m: int = 24,
    repeats: int = 5,
    warmup: int = 1,
    decoding: Decoding | None = None,
    eos_token_id: int | None = None,
    max_position: int = 16,
    seed: int = 0,
    progress: bool = True,
) -> ModelSet:
    """Measure α (all pairs, all ``leniences``), acceptance by position and pass-cost curves
    (``m = 1..max_m``) of ``models = [target, d1, ..., dn]`` (TokenModels, Proposers only
    after them) over ``prompts`` (token-id lists): :func:`measure_acceptance`, then
    :func:`measure_costs` on the median-length prompt and its continuation, then
    :func:`assemble_model_set`."""
    names = check_models(models)
    if not prompts:
        raise ValueError("prompts must hold at least one prompt")
    prompts = [[int(t) for t in p] for p in prompts]
    for i, p in enumerate(prompts):
        if not p:
            raise ValueError(f"prompts[{i}] is empty; every prompt needs at least one token")
    for x in leniences:
        if validate.real("lenience", x) < 1.0:
            raise ValueError(f"leniences must be >= 1, got {x!r}")
    max_new_tokens = validate.count("max_new_tokens", max_new_tokens, minimum=1)
    max_m = validate.count("max_m", max_m, minimum=1)
    decoding = Decoding() if decoding is None else decoding
    acceptance = measure_acceptance(
        models,
        prompts,
        max_new_tokens=max_new_tokens,
        leniences=leniences,
        decoding=decoding,
        eos_token_id=eos_token_id,
        seed=seed,
        progress=progress,
    )
    costs = measure_costs(
        models,
        acceptance.typical_context(),
        max_m=max_m,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        progress=progress,
    )
    return assemble_model_set(names, acceptance, costs, max_position=max_position)
