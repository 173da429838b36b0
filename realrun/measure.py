"""Measure what ewif needs on real models: acceptance α[r][j] and cost coefficients c_i(m).

Everything is written as one ``csd.models/6`` model set (:mod:`ewif.files.model_set`), which
``csd recommend --from FILE`` and ``csd realrun`` read.

Acceptance (:mod:`realrun.acceptance`): teacher-forced on the target's continuations, every
pair and lenience, by position, and of the drafters' ranked candidates (token trees).

Costs (:mod:`realrun.timing`)
-----------------------------
The neural models' passes, the decoder's verify work after the target's passes and the
run's own autoregressive decoding (:mod:`realrun.ar`) are timed **interleaved**, in rounds
that cycle through the measuring prompts (:func:`realrun.timing.time_family`): each pass
rolls back a rejected tail and feeds ``m`` fresh positions onto the prompt and a uniformly
drawn part of its continuation (the run's cache lengths), ``m`` on a grid up to ``max_m``
(linearly interpolated), the mean of the rounds with its standard error; the
autoregressive reference generates the round's prompt as the run does (up to
``max_new_tokens``, EOS, prefill excluded). The model set stores each model's **cost
curve** ``cost_curve[i][m-1] = (t_i(m) + v_i(m)) / t_AR`` — a pass plus the decoder's work
after it, in units of one autoregressive token as the run decodes it, so
``cost_curve[0][0] = 1`` by definition — and ewif prices every pass at the size it really
has (beyond ``max_m`` ewif extends a curve linearly through its last two points, never
downwards). Max-Gram's curve is one point, its seconds per proposed token over ``t_AR``: a
leaf block of ``k`` tokens is ``k`` generating passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from tqdm.auto import tqdm

from ewif.base import validate
from ewif.base.row_cost import max_row_cost, max_row_step
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.model_set import ModelSet
from realrun.acceptance import Acceptance, measure_acceptance
from realrun.ar import ar_timer
from realrun.context_fit import fit_context_cost
from realrun.pass_timing import FamilyTiming, PassTiming
from realrun.rank_measure import RANKS
from realrun.timing import ARTimer, time_family, time_proposer
from realrun.vocabulary import check_logit_width
from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.sampling import Decoding


@dataclass(frozen=True)
class Costs:
    """Step 2 of :func:`measure`: the interleaved timings of the family
    (:func:`realrun.timing.time_family`: neural passes, the decoder's verify work, the
    autoregressive reference), every proposer's seconds per proposed token, and the
    relative curves built from them (:func:`relative_curves`)."""

    names: tuple[str, ...]  # every model, target first
    family: FamilyTiming
    proposers: dict[str, float]  # Max-Gram, bigram: seconds per proposed token
    context_tokens: int  # mean length of the timed contexts
    repeats: int
    warmup: int
    extra: dict = field(default_factory=dict)

    @property
    def timings(self) -> dict[str, PassTiming | float]:
        """Every model's timing in chain order: a PassTiming, or a proposer's s/token."""
        return {n: self.family.passes.get(n, self.proposers.get(n)) for n in self.names}

    @property
    def unit_seconds(self) -> float:
        """Seconds of one autoregressive token as the run decodes it: the unit of the
        curves (``cost_curve[0][0] = 1``)."""
        return self.family.ar_seconds_per_token

    @property
    def curves(self) -> tuple[np.ndarray, ...]:
        return relative_curves(self)

    def merged(self, more: Costs) -> Costs:
        """These costs with ``more`` rounds of the same passes added (same models and
        grid): the timed rounds pool, a proposer's per-token times average, weighted by
        the rounds of each."""
        if self.names != more.names:
            raise ValueError(
                f"can merge only costs of the same models, got {list(self.names)} and "
                f"{list(more.names)}"
            )
        return replace(
            self,
            family=self.family.merged(more.family),
            proposers={
                n: (t * self.repeats + more.proposers[n] * more.repeats)
                / (self.repeats + more.repeats)
                for n, t in self.proposers.items()
            },
            repeats=self.repeats + more.repeats,
        )

    @property
    def row_cost(self) -> np.ndarray:
        """``h_i`` in the curves' unit: what each logit row beyond the second adds to each
        drafter's pass (:meth:`realrun.pass_timing.FamilyTiming.row_seconds`; a catch-up position
        returns none, :mod:`ewif.kernel.pass_cost`), 0 for the target, a proposer and a drafter
        not timed so. A measurement outside what the curve admits — a negative paired
        difference (a row cheaper than the timing's noise), or one above
        :func:`ewif.base.row_cost.max_row_cost` (a one-row pass would cost less than
        nothing) — is taken to that bound, and :meth:`row_cost_bounds` names it."""
        return self._rows[0]

    @property
    def row_step(self) -> np.ndarray:
        """``s_i`` in the curves' unit: what the second logit row adds beyond ``h_i``
        (:meth:`realrun.pass_timing.FamilyTiming.row_step_seconds`), taken into ``[0, what the
        curve admits with h_i]`` like :attr:`row_cost`; 0 where not measured."""
        return self._rows[1]

    def row_cost_bounds(self) -> dict[str, str]:
        """The drafters whose measured row cost or step was taken to a bound, and why."""
        return dict(self._rows[2])

    @cached_property
    def _rows(self) -> tuple[np.ndarray, np.ndarray, dict[str, str]]:
        """``(h, s, bounded)``: every drafter's row cost and row step in the curves' unit,
        each taken to what the curve admits (``h`` first: ``h <= max_row_cost``; then
        ``s <=`` :func:`ewif.base.row_cost.max_row_step`, no one-row pass below 0), and why."""
        h, s = np.zeros(len(self.names)), np.zeros(len(self.names))
        bounded: dict[str, str] = {}
        curves = self.curves
        for i, name in enumerate(self.names[1:], start=1):
            row, step = self.family.row_seconds(name), self.family.row_step_seconds(name)
            if row is None:
                continue
            curve = curves[i]
            h[i] = _bounded(row[0] / self.unit_seconds, max_row_cost(curve), name, "", bounded)
            if step is not None:
                limit = max_row_step(curve, h[i])
                s[i] = _bounded(step[0] / self.unit_seconds, limit, name, "step ", bounded)
        return h, s, bounded

    def curve_stderr(self) -> tuple[np.ndarray, ...]:
        """Standard error of every point of :attr:`curves` (same units): a pass's and the
        decoder's work combined; the target's first point carries the unit's own error, so
        a bootstrap that renormalises by it draws the unit too; 0 for a proposer."""
        unit = self.unit_seconds
        decoder = self.family.decoder
        out = []
        for i, (name, curve) in enumerate(zip(self.names, self.curves, strict=True)):
            t = self.family.passes.get(name)
            if t is None:
                out.append(np.zeros(curve.size))
                continue
            se = _dense(t, t.stderr)
            if decoder is not None:
                extra = _dense(decoder, decoder.stderr)
                se = np.hypot(se, extra[: se.size] if i == 0 else extra[0])
            se = se / unit
            if i == 0:
                se[0] = self.family.ar_stderr / unit
            out.append(se)
        return tuple(out)


def _dense(t: PassTiming, values: Sequence[float]) -> np.ndarray:
    """``values`` (one per timed m of ``t``) interpolated to ``m = 1..max(m)``."""
    return np.interp(np.arange(1, t.m[-1] + 1), t.m, values)


#: Wall seconds a measurement's timed rounds take at least, rounds permitting, in ``csd
#: measure``, ``csd realrun`` and :func:`realrun.pipeline.run_pipeline`
#: (:func:`realrun.timing.time_family`, *Rounds by time*).
MIN_TIMING_SECONDS = 60.0


def measure_costs(
    models: Sequence[TokenModel | Proposer],
    contexts: Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    max_m: int,
    ar: ARTimer,
    decoding: Decoding,
    repeats: int = 8,
    warmup: int = 1,
    ar_tokens: int = 32,
    seed: int = 0,
    progress: bool = True,
    min_seconds: float = 0.0,
) -> Costs:
    """Pass-cost curves of every model over the ``(prompt, continuation)`` contexts of the
    measuring prompts (module docstring): the neural models, the decoder's verify work and
    the autoregressive reference ``ar`` (generating each prompt up to ``ar_tokens`` tokens,
    the run's ``max_new_tokens``) interleaved in ``repeats`` rounds, more while they have
    taken less than ``min_seconds`` (at most four times as many;
    :func:`realrun.timing.time_family`); every proposer timed proposing ``max_m`` tokens
    along each context."""
    pairs = [([int(t) for t in p], [int(t) for t in c]) for p, c in contexts]
    if not pairs:
        raise ValueError("contexts must hold at least one (prompt, continuation) pair")
    neural = [m for m in models if isinstance(m, TokenModel)]
    with tqdm(total=repeats, desc="measure cost", unit="round", disable=not progress) as bar:
        family = time_family(
            neural,
            pairs,
            max_m,
            ar=ar,
            decoding=decoding,
            rounds=repeats,
            warmup=warmup,
            ar_tokens=ar_tokens,
            seed=seed,
            progress=bar.update,
            min_seconds=min_seconds,
        )
    proposers = {
        m.name: float(np.mean([time_proposer(m, p + c, len(p), max_m) for p, c in pairs]))
        for m in models
        if not isinstance(m, TokenModel)
    }
    return Costs(
        tuple(m.name for m in models),
        family,
        proposers,
        round(float(np.mean(family.contexts))),
        len(family.contexts),
        warmup,
    )


def relative_curves(costs: Costs) -> tuple[np.ndarray, ...]:
    """Every model's dense cost curve in units of one autoregressive token
    (:attr:`Costs.unit_seconds`): ``c_i(m) = (t_i(m) + v_i(m)) / t_AR`` with ``v_0(m)`` the
    decoder's verify work after a target pass of ``m`` rows and ``v_j = v(1)`` for a drafter
    (it decodes one row after each pass); ``c_0(1) = 1`` by definition (an AR token);
    a proposer's curve is its seconds per proposed token over ``t_AR``."""
    unit = costs.unit_seconds
    if not unit > 0:
        raise ValueError(f"an autoregressive token must take > 0 s, got {unit!r} s")
    decoder = costs.family.decoder
    out = []
    for i, name in enumerate(costs.names):
        t = costs.family.passes.get(name)
        if t is None:
            out.append(np.array([costs.proposers[name] / unit]))
            continue
        curve = t.dense()
        if decoder is not None:
            work = decoder.dense()
            curve = curve + (work[: curve.size] if i == 0 else work[0])
        curve = curve / unit
        if i == 0:
            curve[0] = 1.0
        out.append(curve)
    return tuple(out)


def assemble_model_set(
    names: Sequence[str],
    acceptance: Acceptance,
    costs: Costs,
    *,
    max_position: int = 16,
    metadata: dict | None = None,
) -> ModelSet:
    """Step 3 of :func:`measure`: the ``csd.models/6`` model set of ``names`` (target first),
    with how its costs move with the context length (:mod:`realrun.context_fit`)."""
    decoding = acceptance.decoding
    curves = costs.curves
    fitted = fit_context_cost(costs.family, names, curves, costs.unit_seconds) or (None, None)
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
        **({"skipped_prompts": list(acceptance.skipped)} if acceptance.skipped else {}),
        "positions": sum(len(c) for _, c in acceptance.contexts),
        "max_new_tokens": acceptance.max_new_tokens,
        "cost_model": "cost_curve[i][m-1] = (mean seconds of a pass of model i over m "
        "positions returning all m logit rows + the decoder's work after it) / seconds of "
        "one autoregressive token as the run decodes it (cost_curve[0][0] = 1); passes, "
        "verify work and AR timed interleaved in rounds over the measuring contexts, m on a "
        "grid, linear in between, at the run's cache lengths, AR generating each measuring "
        "prompt as the run does; row_cost[i] = what each logit row beyond the second adds "
        "to drafter i's pass and row_step[i] = what the second adds beyond that (its pass "
        "over 4 positions with 1, 2 and 4 rows, paired, same rounds), in the same unit; "
        "proposers: seconds per "
        "proposed token",
        "ar_seconds_per_token": costs.unit_seconds,
        "ar_seconds_per_token_stderr": costs.family.ar_stderr,
        "target_one_token_pass_s": costs.family.passes[names[0]].seconds[0],
        "timing": {
            name: (
                _timing_record(
                    t, costs.family.row_seconds(name), costs.family.row_step_seconds(name)
                )
                if isinstance(t, PassTiming)
                else {"seconds_per_token": t}
            )
            for name, t in costs.timings.items()
        },
        "decoder_verify_timing": None
        if costs.family.decoder is None
        else costs.family.decoder.to_dict(),
        **({"row_cost_bounded": bounded} if (bounded := costs.row_cost_bounds()) else {}),
        "timing_context_tokens": costs.context_tokens,
        "context_fit": fitted[1],
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
        row_cost=costs.row_cost,
        row_step=costs.row_step,
        context_cost=fitted[0],
        bootstrap=BootstrapData(acceptance.by_prompt(), costs.curve_stderr(), acceptance.traces())
        if len(acceptance.contexts) >= 2
        else None,
        rank_acceptance=acceptance.rank_acceptance(),
    )


def catch_up_flags(costs: Costs) -> tuple[bool, ...]:
    """Every KV-cached drafter (a timed token model) pays its catch-up pass
    (:mod:`ewif.kernel.catch_up`), as the decoder feeds it; proposers (Max-Gram, bigram) do not, and
    the target's flag changes nothing (False)."""
    flags = [name in costs.family.passes for name in costs.names]
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
    check_logit_width(models)
    return names


def measure(
    models: Sequence[TokenModel | Proposer],
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int = 64,
    leniences: Sequence[float] = (1.0, 2.0, 3.0, 5.0),
    max_m: int = 24,
    repeats: int = 8,
    warmup: int = 1,
    decoding: Decoding | None = None,
    eos_token_id: int | None = None,
    max_position: int = 16,
    seed: int = 0,
    progress: bool = True,
    ar: ARTimer | None = None,
    ranks: int = RANKS,
) -> ModelSet:
    """Measure α (all pairs, all ``leniences``), the acceptance of ``ranks`` ranked
    candidates, acceptance by position and pass-cost curves (``m = 1..max_m``) of
    ``models = [target, d1, ..., dn]`` (TokenModels, Proposers only after them) over
    ``prompts`` (token-id lists): :func:`realrun.acceptance.measure_acceptance`, then
    :func:`measure_costs` over the prompts and their continuations (the autoregressive
    reference ``ar`` defaults to the run's, :func:`realrun.ar.ar_timer`), then
    :func:`assemble_model_set`."""
    names = check_models(models)
    prompts = validate.prompts("prompts", prompts)
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
        ranks=ranks,
    )
    costs = measure_costs(
        models,
        acceptance.contexts,
        max_m=max_m,
        ar=ar_timer(models[0], decoding, eos_token_id, seed) if ar is None else ar,
        decoding=decoding,
        ar_tokens=max_new_tokens,
        repeats=repeats,
        warmup=warmup,
        seed=seed,
        progress=progress,
    )
    return assemble_model_set(names, acceptance, costs, max_position=max_position)


def _bounded(value: float, limit: float, name: str, what: str, bounded: dict[str, str]) -> float:
    """``value`` taken into ``[0, limit]``; a value taken is named in ``bounded``."""
    if value < 0:
        bounded[f"{name} {what}".strip()] = f"measured {value:.4g} < 0: none priced"
        return 0.0
    if value > limit:
        bounded[f"{name} {what}".strip()] = (
            f"measured {value:.4g} > {limit:.4g}, what the curve admits: priced at it"
        )
        return max(limit, 0.0)
    return value


def _timing_record(
    timing: PassTiming, row: tuple[float, float] | None, step: tuple[float, float] | None
) -> dict:
    """A model's ``metadata.timing`` entry: its pass timing and, for a drafter, what each
    logit row beyond the second adds to a pass and what the second adds beyond that
    (``row_seconds``, ``row_step_seconds`` and their standard errors, as measured; the model
    set's ``row_cost`` and ``row_step`` price them)."""
    out = timing.to_dict()
    if row is not None:
        out["row_seconds"], out["row_seconds_stderr"] = row
    if step is not None:
        out["row_step_seconds"], out["row_step_seconds_stderr"] = step
    return out
