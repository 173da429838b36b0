"""An interval on every prediction: the bootstrap over measuring prompts, through the exact EWIF.

A model set measured on ``P`` prompts can carry what a bootstrap needs (``bootstrap`` in a
``csd.models/3`` and later file):

* ``acceptance_by_prompt["l,r,j"] = [[s_1, n_1], ..., [s_P, n_P]]`` — per measuring prompt,
  the sum of the per-position acceptances ``a_t`` of pair ``(r, j)`` at lenience ``l`` and
  the number of positions; ``α[l][r][j] = Σ_p s_p / Σ_p n_p``;
* ``cost_curve_stderr[i][m-1]`` (optional) — the standard error of each cost-curve point;
* ``acceptance_traces["l,r,j"] = [[a_1, ..., a_T], ...]`` (optional) — per measuring prompt,
  the per-position acceptances themselves (their sums are ``acceptance_by_prompt``): what
  :mod:`simulate.trace_replay` replays, keeping how acceptances depend on the text.

A replicate resamples **whole prompts** with replacement (acceptances within a prompt are
correlated; prompts are the independent unit), the same draw for every pair, and recomputes
every α; it draws each model's curve as ``c_i·exp(z_i·se_i/c_i)`` (a point ``c_i = 0``
stays 0) with one standard normal ``z_i`` per model (the timing of a model drifts as a
whole; multiplicative, so a noisy point never turns negative), and the unit — the target's
first point, one autoregressive token, timed apart from the passes — as
``c_0(1)·exp(z_u·se_0(1)/c_0(1))`` with a standard normal ``z_u`` of its own; then every
curve is renormalised so the unit stays 1. The unit's error thereby moves every ratio
``c_i(m)/c_0(1)``, the target's own review passes included: drawn with the target's ``z_0``,
an error of the unit the size of the passes' would cancel in them, and an SD with a free
proposer (Max-Gram) would get no cost uncertainty at all. The exact EWIF of one
configuration on ``B`` replicates gives the percentile interval
``[q_{(1−level)/2}, q_{(1+level)/2}]`` (:func:`prediction_interval`). Seeded: the same call
gives the same interval.

Token trees. A set with rank-acceptance vectors (``rank_acceptance``, ``csd.models/6``) and
their per-prompt sums has them redrawn on the same prompts as α (:func:`drawn_ranks`: ``p_1``
is the replicate's α, the other ranks resampled and widened as α is), so the interval of a
tree (:func:`tree_prediction_intervals`) carries the uncertainty of its runner-up ranks too.

Few prompts. The plain percentile bootstrap of a mean over ``P`` prompts under-covers (its
variance is ``(P−1)/P`` of the unbiased one, and it uses normal rather than Student
quantiles): at ``P = 8`` a nominal 90 % interval covers about 78 %. Each replicate α is
therefore moved away from the measured α by the factor ``√(P/(P−1))·t_{P−1}/z`` at the
interval's level — Hesterberg's *expanded percentile* interval ("What teachers should know
about the bootstrap", 2015) — and clipped to ``[0, 1]``. The factor tends to 1 as ``P`` grows.

Confidence or prediction. Without ``held_out_prompts`` the interval is one for the *expected*
speed-up (what ``csd recommend`` shows: is speculation worth it on this kind of prompt?). A
measurement on ``H`` other prompts scatters around that expectation by its own sampling
error, so with ``held_out_prompts = H`` each replicate also draws a pseudo held-out set of
``H`` prompts from the resampled measuring prompts and shifts α by its deviation too,

    α* = α̂ + w·(α(J) − α̂),   I: P prompts drawn from the P,  J: H prompts drawn from I,

a two-stage resample whose deviation is ``(α(I) − α̂) + (α(J) − α(I))``, two independent
parts, so that ``Var α* ≈ w²·σ²·(1/P + 1/H)`` with ``σ²`` the between-prompt variance — the
classical prediction interval ``x̄ ± t·s·√(1/P + 1/H)`` of a future mean, here through the
exact EWIF: the *prediction interval* of the speed-up a run on ``H`` held-out prompts will
measure (what ``csd realrun`` reports and checks).

Categories never measured. A run's held-out prompts may come from a task category none of the
measuring prompts had (``csd realrun --held-out-categories``, or a user's workload). Its
acceptance is then not the measured one plus prompt noise: the category has an acceptance of
its own, shared by all its prompts, unknown. Given the categories of both splits
(:class:`~ewif.base.resampling.HeldOut` as ``held_out_prompts``), each unseen category's
``h`` pseudo held-out prompts are drawn together from one stand-in category, picked
uniformly among the categories of the replicate's measuring prompts
(:func:`~ewif.base.resampling.prompt_draw`): the second stage resamples categories, so the
interval carries the spread between categories (a rag answer copies its document, a poem
does not) instead of averaging it away over independent prompts. Held-out prompts of measured
categories are drawn as before, and without unseen categories the replicates are the plain
count's, number for number.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ewif.base import validate
from ewif.base.configuration import Configuration
from ewif.base.resampling import (
    LEVEL,
    REPLICATES,
    HeldOut,
    drawn_curves,
    drawn_row_cost,
    drawn_row_step,
    expansion,
    held_out_spec,
    prompt_draw,
)
from ewif.files.rank_acceptance import RankAcceptance

if TYPE_CHECKING:
    from ewif.files.model_set import ModelSet
    from ewif.files.tree_config import TreeConfig


def replicate_sets(
    model_set: ModelSet,
    replicates: int = REPLICATES,
    seed: int = 0,
    level: float = LEVEL,
    held_out_prompts: int | HeldOut | None = None,
) -> list[ModelSet]:
    """``replicates`` bootstrap copies of ``model_set`` (module docstring; with
    ``held_out_prompts`` the replicates of a prediction for a run on that many other
    prompts, or on those of a :class:`~ewif.base.resampling.HeldOut`); ValueError when it
    carries no bootstrap data."""
    data = model_set.bootstrap
    if data is None:
        raise ValueError(
            "this model set carries no bootstrap data (measure it with csd measure "
            "to get per-prompt acceptances), so it has no prediction interval"
        )
    b = validate.count("replicates", replicates, minimum=2)
    rng = np.random.default_rng(validate.count("seed", seed))
    held = held_out_spec(held_out_prompts, data.prompts)
    widen = expansion(data.prompts, level)
    out = []
    for _ in range(b):
        idx = prompt_draw(rng, data.prompts, held)
        alpha = {lenience: m.copy() for lenience, m in model_set.alpha.items()}
        for (lenience, r, j), table in data.acceptance_by_prompt.items():
            total = table[idx].sum(axis=0)
            point = model_set.alpha[lenience][r, j]
            value = total[0] / total[1] if total[1] > 0 else point
            value = min(max(point + widen * (value - point), 0.0), 1.0)
            for target in alpha if r == 0 else (lenience,):  # no lenience at the target
                alpha[target][r, j] = value
        changes: dict[str, Any] = {"alpha": alpha, "bootstrap": None}
        if model_set.rank_acceptance is not None:
            changes["rank_acceptance"] = drawn_ranks(model_set, alpha, idx, widen)
        if data.cost_curve_stderr is not None:
            curves = drawn_curves(model_set.cost_curve, data.cost_curve_stderr, rng)
            changes.update(cost_curve=curves, cost=np.array([c[0] for c in curves]))
            changes.update(drawn_rows(model_set, curves))
        out.append(dataclasses.replace(model_set, **changes))
    return out


def drawn_rows(model_set: ModelSet, curves: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The set's ``row_cost`` and ``row_step`` (those it has) once its curves are drawn as
    ``curves`` (:func:`~ewif.base.resampling.drawn_row_cost`,
    :func:`~ewif.base.resampling.drawn_row_step`): a ``dataclasses.replace`` change."""
    out = {}
    if model_set.row_cost is not None:
        out["row_cost"] = drawn_row_cost(model_set.row_cost, model_set.cost_curve, curves)
    if model_set.row_step is not None:
        out["row_step"] = drawn_row_step(
            model_set.row_step, out.get("row_cost"), model_set.cost_curve, curves
        )
    return out


def drawn_ranks(
    model_set: ModelSet, alpha: dict[float, np.ndarray], idx: np.ndarray, widen: float
) -> RankAcceptance:
    """The set's rank-acceptance vectors on one replicate's prompts ``idx``: each rank's
    per-prompt sums resampled with the α of the same draw (token trees; ``p_1`` is the
    replicate's α, as in a measured set), moved from the measured vector by ``widen`` as α is,
    clipped at 0 and scaled so that ``Σ p <= 1``; a pair without per-prompt evidence keeps
    its vector with ``p_1`` the replicate α. The proposers' candidate presence is kept as
    measured."""
    section = model_set.rank_acceptance
    out = {}
    for (lenience, r, j), point in section.vectors.items():
        first = float(alpha[lenience][r, j])
        table = section.by_prompt.get((lenience, r, j))
        if table is None:
            rest = point[1:]
        else:
            total = table[idx].sum(axis=0)
            drawn = total[:-1] / total[-1] if total[-1] > 0 else point
            rest = np.maximum(point[1:] + widen * (drawn[1:] - point[1:]), 0.0)
        room = 1.0 - first
        if rest.sum() > room:
            rest = rest * (room / rest.sum())
        out[(lenience, r, j)] = np.concatenate([[first], rest])
    return RankAcceptance(out, presence=section.presence)


@dataclass(frozen=True)
class PredictionInterval:
    """``point`` (EWIF on the measured set) and the bootstrap interval ``[low, high]``."""

    point: float
    low: float
    high: float
    level: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def describe(self) -> str:
        return f"{self.point:.3f}× [{self.low:.2f}, {self.high:.2f}]"


def prediction_interval(
    model_set: ModelSet,
    models: Sequence[str],
    K: object,
    lenience: float = 1.0,
    *,
    catch_up: Sequence[bool] | None = None,
    level: float = LEVEL,
    replicates: int = REPLICATES,
    seed: int = 0,
    held_out_prompts: int | HeldOut | None = None,
    max_new_tokens: int | Sequence[int] | None = None,
) -> PredictionInterval:
    """The exact EWIF of one configuration and its bootstrap percentile interval (for the
    expected speed-up; with ``held_out_prompts``, for a run on that many other prompts or
    on a :class:`~ewif.base.resampling.HeldOut`'s;
    with ``max_new_tokens``, for generations of that length or those lengths, Theorem FL)."""
    (interval,) = prediction_intervals(
        model_set,
        [Configuration(models, K, lenience)],
        catch_up=[catch_up],
        level=level,
        replicates=replicates,
        seed=seed,
        held_out_prompts=held_out_prompts,
        max_new_tokens=None if max_new_tokens is None else [max_new_tokens],
    )
    return interval


def prediction_intervals(
    model_set: ModelSet,
    configs: Sequence[Configuration],
    *,
    catch_up: Sequence[Sequence[bool] | None] | None = None,
    level: float = LEVEL,
    replicates: int = REPLICATES,
    seed: int = 0,
    held_out_prompts: int | HeldOut | None = None,
    max_new_tokens: Sequence[int | Sequence[int] | None] | None = None,
) -> list[PredictionInterval]:
    """:func:`prediction_interval` of every configuration in ``configs``, on one set of
    replicates (drawn once, so the intervals share their draws); ``catch_up``: per
    configuration, its models' catch-up flags or None (the set's); ``max_new_tokens``: per
    configuration, its generation length(s) (Theorem FL) or None (endless)."""

    flags = _per_configuration("catch_up", catch_up, len(configs))
    return _on_shared_draws(
        model_set,
        len(configs),
        lambda ms, i: ms.to_cascade(configs[i], catch_up=flags[i]),
        level=level,
        replicates=replicates,
        seed=seed,
        held_out_prompts=held_out_prompts,
        max_new_tokens=max_new_tokens,
    )


def _on_shared_draws(
    model_set: ModelSet,
    count: int,
    cascade_of: Callable[[ModelSet, int], Any],
    *,
    level: float,
    replicates: int,
    seed: int,
    held_out_prompts: int | HeldOut | None,
    max_new_tokens: Sequence[int | Sequence[int] | None] | None,
) -> list[PredictionInterval]:
    """The intervals of ``count`` configurations on one set of replicates, configuration
    ``i``'s cascade on a set ``ms`` being ``cascade_of(ms, i)``."""
    expansion(2, level)  # checks the level before any work
    lengths = _per_configuration("max_new_tokens", max_new_tokens, count)
    reps = replicate_sets(model_set, replicates, seed, level, held_out_prompts)
    return [
        _interval([cascade_of(ms, i).ewif(n) for ms in (model_set, *reps)], level)
        for i, n in enumerate(lengths)
    ]


def _per_configuration(name: str, values: Sequence | None, n: int) -> list:
    """``values`` as one entry per configuration (None: None for each)."""
    out = [None] * n if values is None else list(values)
    if len(out) != n:
        raise ValueError(f"{name} must give one entry per configuration ({n}), got {len(out)}")
    return out


def _interval(values: Sequence[float], level: float) -> PredictionInterval:
    """``values[0]`` (the measured set's EWIF) with the central ``level`` quantiles of the
    replicates' EWIFs, ``values[1:]``."""
    low, high = np.quantile(values[1:], [(1 - level) / 2, (1 + level) / 2])
    return PredictionInterval(float(values[0]), float(low), float(high), level)


def tree_prediction_intervals(
    model_set: ModelSet,
    configs: Sequence[TreeConfig],
    *,
    level: float = LEVEL,
    replicates: int = REPLICATES,
    seed: int = 0,
    held_out_prompts: int | HeldOut | None = None,
    max_new_tokens: Sequence[int | Sequence[int] | None] | None = None,
) -> list[PredictionInterval]:
    """:func:`prediction_intervals` of token-tree configurations
    (:func:`ewif.files.tree_models.tree_cascade`, the set's catch-up flags): every replicate
    redraws α, the rank-acceptance vectors (:func:`drawn_ranks`) and the cost curves from
    the same prompts, so a tree's interval carries the uncertainty of its runner-up ranks."""
    from ewif.files.tree_models import tree_cascade

    return _on_shared_draws(
        model_set,
        len(configs),
        lambda ms, i: tree_cascade(ms, configs[i]),
        level=level,
        replicates=replicates,
        seed=seed,
        held_out_prompts=held_out_prompts,
        max_new_tokens=max_new_tokens,
    )
