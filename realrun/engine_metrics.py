"""Serving engines' own speculative-decoding counters → acceptance α and a model set
(``csd measure --from-metrics``).

The counters are read per format by :mod:`realrun.engine_counters`; this module turns them
into α (:func:`acceptance`) and, with the pass costs given, into a model set
(:func:`model_set_from_metrics`).

The math. A verify step reviews a draft of (up to) ``k`` tokens left to right and stops at the
first rejection. Let ``A_0`` be the number of steps and ``A_i`` (``i = 1..k``) the steps whose
first ``i`` draft tokens were all accepted (the per-position counter of 0-based position
``i − 1``). Position ``i`` is reviewed in the ``A_{i−1}`` steps that reached it, so the
conditional acceptance there is ``α_i = A_i / A_{i−1}``, a binomial proportion with its Wilson
interval (:func:`simulate.stats.wilson_interval`). Under the Bernoulli model (one α at every
position) the likelihood of all steps factorises over the reviewed positions, so the maximum
likelihood estimate is the pooled proportion ``α̂ = Σ_i A_i / Σ_i A_{i−1}`` (accepted tokens
over reviewed tokens, ``Σ_i A_{i−1} = A_0 + accepted − A_k``), with the Wilson interval of
those totals. The engines' own "acceptance rate" ``accepted / drafted`` is not α: it also
counts the draft tokens behind a rejection, which are never reviewed.

A format without per-position counts (llama-speculative-simple's statistics) gives α by
the moment ``n_accept / n_drafted = Σ_{i=1..k} α^i / k`` (:func:`iid_alpha`, drafts of k
i.i.d. tokens), without an interval.

When some drafts are shorter than ``k`` (``draft_tokens < k·A_0``: an n-gram without a
match, a draft stopped by a minimum probability, the end of a generation) ``A_{i−1}``
overcounts the steps that drafted position ``i``, so ``α_i`` and ``α̂`` are lower bounds;
the output says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ewif.base import validate
from ewif.files.model_set import ModelSet
from realrun.engine_counters.spec_counters import PRINTED_PRECISION, SpecCounters

if TYPE_CHECKING:
    from ewif.files.batch_costs import BatchCosts


@dataclass(frozen=True)
class PositionAlpha:
    """Conditional acceptance at 1-based draft position ``position``: ``accepted`` of
    ``reviewed`` steps, with the Wilson interval ``[low, high]``."""

    position: int
    accepted: int
    reviewed: int
    alpha: float
    low: float
    high: float


@dataclass(frozen=True)
class EngineAcceptance:
    """α read from a run's counters (module docstring): the pooled estimate with its interval
    (None for the moment estimate of llama-speculative-simple), by position when counted."""

    counters: SpecCounters
    alpha: float
    low: float | None
    high: float | None
    reviewed: int | None
    level: float
    method: str
    by_position: tuple[PositionAlpha, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        c = self.counters
        return {
            "format": c.format,
            "model_name": c.model_name,
            "counters": {
                "drafts": c.drafts,
                "draft_tokens": c.draft_tokens,
                "accepted": c.accepted,
                "k": c.k,
                "accepted_per_position": None if c.per_position is None else list(c.per_position),
            },
            "alpha": self.alpha,
            "interval": None if self.low is None else [self.low, self.high],
            "level": self.level,
            "reviewed": self.reviewed,
            "method": self.method,
            "engine_acceptance_rate": c.accepted / c.draft_tokens if c.draft_tokens else None,
            "by_position": [
                {
                    "position": p.position,
                    "accepted": p.accepted,
                    "reviewed": p.reviewed,
                    "alpha": p.alpha,
                    "interval": [p.low, p.high],
                }
                for p in self.by_position
            ],
            "notes": list(self.notes),
        }


def format_acceptance(acc: EngineAcceptance, files: Sequence[str], names: Sequence[str]) -> str:
    """The human table of ``csd measure --from-metrics``."""
    from ewif.base.text_table import table

    c = acc.counters
    pct = f"{100 * acc.level:g}%"
    lines = [
        f"csd measure --from-metrics {' '.join(map(str, files))} ({c.format}"
        + (f", model {c.model_name}" if c.model_name else "")
        + f"): {names[0]} reviewing {names[1]}",
        f"{c.drafts:,} verify steps, {c.draft_tokens:,} draft tokens (k = {c.k}), "
        f"{c.accepted:,} accepted; the engine's acceptance rate accepted/drafted = "
        f"{c.accepted / c.draft_tokens:.4f} is not α (it counts unreviewed tokens)",
    ]
    if acc.by_position:
        lines += [
            "",
            table(
                ["position", "accepted", "reviewed", "α (conditional)", f"{pct} Wilson"],
                [
                    [
                        p.position,
                        f"{p.accepted:,}",
                        f"{p.reviewed:,}",
                        f"{p.alpha:.4f}",
                        f"[{p.low:.4f}, {p.high:.4f}]",
                    ]
                    for p in acc.by_position
                ],
            ),
            "",
            f"α = {acc.alpha:.4f}  {pct} Wilson [{acc.low:.4f}, {acc.high:.4f}]  ({acc.method}: "
            f"{c.accepted:,} accepted of {acc.reviewed:,} reviewed draft tokens)",
        ]
    else:
        lines.append(f"α = {acc.alpha:.4f}  ({acc.method})")
    lines += [f"note: {n}" for n in acc.notes]
    return "\n".join(lines)


def iid_alpha(fraction: float, k: int) -> float:
    """α of i.i.d. acceptance whose drafts of ``k`` tokens have ``fraction`` of their tokens
    accepted on average: solves ``α(1 − α^k) / ((1 − α) k) = fraction`` (bisection)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")

    def accepted(a: float) -> float:
        return sum(a**i for i in range(1, k + 1)) / k

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if accepted(mid) < fraction else (lo, mid)
    return (lo + hi) / 2


def acceptance(counters: SpecCounters, level: float = 0.95) -> EngineAcceptance:
    """α from ``counters`` (module docstring), Wilson intervals at ``level``."""
    from simulate.stats import wilson_interval

    level = validate.probability("level", level)
    c = counters
    if c.drafts == 0 or c.draft_tokens == 0:
        raise ValueError(
            f"{c.format} counters: no verify step or draft token was counted (drafts = "
            f"{c.drafts}, draft tokens = {c.draft_tokens}): nothing to read"
        )
    notes = []
    if c.draft_tokens < c.k * c.drafts * (1 - PRINTED_PRECISION):
        notes.append(
            f"{c.k * c.drafts - c.draft_tokens} of the k·drafts = {c.k * c.drafts} draft "
            "positions were never drafted (drafts shorter than k): the per-position and pooled "
            "α are lower bounds"
        )
    if c.per_position is None:
        alpha = iid_alpha(c.accepted / c.draft_tokens, c.k)
        notes.append(
            "no per-position counts in this format: α from the accepted fraction of drafts of "
            "k i.i.d. tokens, without an interval"
        )
        method = "moment: accepted/drafted = Σα^i/k"
        return EngineAcceptance(c, alpha, None, None, None, level, method, (), tuple(notes))
    reached = np.array([c.drafts, *c.per_position[:-1]], dtype=np.int64)
    ok = np.array(c.per_position, dtype=np.int64)
    low, high = wilson_interval(ok, reached, level)
    by_position = tuple(
        PositionAlpha(i + 1, int(ok[i]), int(reached[i]), ok[i] / reached[i], low[i], high[i])
        for i in range(c.k)
        if reached[i] > 0  # positions past the last reached one carry no evidence
    )
    total_ok, total = int(ok.sum()), int(reached.sum())
    lo, hi = wilson_interval(total_ok, total, level)
    method = "pooled per-position counts (Bernoulli maximum likelihood)"
    return EngineAcceptance(
        c, total_ok / total, float(lo), float(hi), total, level, method, by_position, tuple(notes)
    )


def parse_cost_curves(specs: Sequence[str]) -> dict[str, list[float]]:
    """``--cost-curve NAME=C1,C2,...`` (repeatable): model ``NAME``'s pass cost over
    ``m = 1, 2, ...`` positions in units of the target's one-position pass (the target's
    curve starts at 1; beyond the last point the curve continues as :mod:`ewif.kernel.pass_cost`
    says). Each NAME once; every value a finite number >= 0."""
    given = validate.name_values("--cost-curve", specs, "NAME=C1,C2,... (costs for m = 1, 2, ...)")
    out: dict[str, list[float]] = {}
    for name, values in given.items():
        curve = validate.comma_separated(f"--cost-curve {name}", values, float, "costs")
        out[name] = validate.costs(f"--cost-curve {name}", curve).tolist()
    return out


def curves_from_file(path: str | Path, names: Sequence[str]) -> tuple[list[list[float]], dict]:
    """The measured cost curves of ``names`` (target first) from a model-set file whose target
    is ``names[0]``, and what the file says of them (timing, catch-up flags, batched cost
    curves)."""
    from ewif.files import model_set as model_io

    ms = model_io.load(path)
    if ms.cost_curve is None:
        raise ValueError(f"{path}: the model set has no cost_curve (measured pass costs)")
    if ms.models[0] != names[0]:
        raise ValueError(
            f"{path}: its target is {ms.models[0]!r}, not {names[0]!r} (costs are in units of "
            "the target's pass)"
        )
    idx = [ms.index(n) for n in names]
    timing = ms.metadata.get("timing", {})
    extra: dict[str, Any] = {"timing": {n: timing[n] for n in names if n in timing}}
    if ms.catch_up is not None:
        extra["catch_up"] = [ms.catch_up[i] for i in idx]
    if ms.batch_costs is not None:
        from ewif.files.batch_costs import BatchCosts

        extra["batch_costs"] = BatchCosts(
            {b: tuple(c[i] for i in idx) for b, c in ms.batch_costs.curves.items()}
        )
    return [ms.cost_curve[i].tolist() for i in idx], extra


def model_set_from_metrics(
    acc: EngineAcceptance,
    names: Sequence[str],
    curves: Sequence[Sequence[float]],
    *,
    catch_up: Sequence[bool] | None = None,
    batch_costs: BatchCosts | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ModelSet:
    """The model set of target ``names[0]`` and drafter ``names[1]``: α at lenience 1 and by
    position from ``acc``, the pass costs ``curves`` (one per name) and, when given, their
    catch-up flags and batched cost curves."""
    names = tuple(names)
    if len(names) != 2:
        raise ValueError(
            f"an engine's counters describe one target and one drafter, got {list(names)}"
        )
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = acc.alpha
    by_position = {(0, 1): np.array([p.alpha for p in acc.by_position])} if acc.by_position else {}
    meta = {"source": "engine metrics (csd measure --from-metrics)", **(metadata or {})}
    return ModelSet(
        models=names,
        cost=np.array([float(c[0]) for c in curves]),
        cost_per_token=np.zeros(2),
        alpha={1.0: alpha},
        alpha_by_position=by_position,
        metadata={**meta, "engine_metrics": acc.to_dict()},
        cost_curve=tuple(np.asarray(c, dtype=float) for c in curves),
        catch_up=None if catch_up is None else tuple(catch_up),
        batch_costs=batch_costs,
    )
