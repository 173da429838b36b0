"""The typed metadata of a results file (``csd.results/1``): what its report reads.

:func:`run_metadata` is the one adapter from the stored mapping, and reads files written
before a key changed: ``median_s`` pass times before the mean, intervals before
``held_out_prompts``, the target's one-token pass before the AR unit (``ar_seconds_per_token``),
``timed_mean_s`` before ``priced_mean_s``. Keys a run did not write read as empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TimedGrid:
    """One model's pass times as the measuring phase timed them: mean seconds at each ``m``
    and, for a catch-up drafter, one logit row's seconds (± its standard error)."""

    m: tuple[float, ...]
    seconds: tuple[float, ...]
    row_seconds: float | None = None
    row_seconds_stderr: float | None = None

    def at(self, m: float) -> float:
        """The mean pass seconds at ``m``, interpolated linearly on the timed grid."""
        return float(np.interp(m, self.m, self.seconds))


@dataclass(frozen=True)
class ARReference:
    """What priced one autoregressive token in the measuring phase: its AR decoding
    (``"ar"``), or, in files before the AR unit, the target's one-token pass (``"pass"``)."""

    seconds: float
    kind: str


@dataclass(frozen=True)
class StoredModelSet:
    """What the report reads of the run's model set (``metadata.model_set``); the whole set
    is :meth:`ewif.files.model_set.ModelSet.from_dict` of :attr:`RunMetadata.model_set_dict`."""

    models: tuple[str, ...]
    row_cost: tuple[float | None, ...] | None
    timing: dict[str, TimedGrid]
    ar_reference: ARReference | None
    numerics_choice: str | None


@dataclass(frozen=True)
class PassTime:
    """The run's passes of one model over ``m`` positions: how many and their mean seconds
    (``mean_s``; files before the mean kept only ``median_s``)."""

    passes: int
    seconds: float
    statistic: str  # "mean" or "median"


@dataclass(frozen=True)
class TimingGap:
    """The run's mean pass of ``model`` over ``m`` positions against the priced one (at
    ``run_context``, the passes' mean cached context, where the run recorded it and the model
    set has c(m, L))."""

    model: str
    m: str
    error: float
    relative_error: float | None
    run_mean_s: float
    priced_mean_s: float
    passes: int
    run_context: float | None = None


@dataclass(frozen=True)
class Interval:
    """A prediction with its interval and whether the measurement fell inside; from the
    bootstrap (``held_out_prompts`` set) or a trace replay (``error`` set too). Files before
    prediction intervals have no ``held_out_prompts`` (a bootstrap over measuring prompts);
    ``unseen_categories``: held-out categories the measuring prompts never saw, drawn as
    categories (:class:`ewif.base.resampling.HeldOut`), with their prompt counts."""

    point: float
    low: float
    high: float
    level: float
    inside: bool
    held_out_prompts: int | None = None
    error: float | None = None
    unseen_categories: dict[str, int] | None = None


@dataclass(frozen=True)
class PassStats:
    """Count, mean, median and p90 seconds of one model's passes over one ``m``."""

    count: int
    mean_s: float
    median_s: float
    p90_s: float


@dataclass(frozen=True)
class WallSplit:
    """One method's wall time split into passes, call overhead, proposers, the decoder and
    the residual (:mod:`realrun.books`), with its passes by model and ``m``."""

    wall_s: float
    shares: dict[str, float]
    flagged: bool
    passes: dict[str, dict[str, PassStats]]

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> WallSplit:
        shares = {
            "passes": raw["pass_s"],
            "call overhead": sum(raw["call_overhead_s"].values()),
            "proposers": sum(raw["proposer_s"].values()),
            "decoder": raw["decoder_s"],
            "residual": raw["residual_s"],
        }
        passes = {
            model: {
                m: PassStats(v["count"], v["mean_s"], v["median_s"], v["p90_s"])
                for m, v in by_m.items()
            }
            for model, by_m in raw["passes"].items()
        }
        return cls(raw["wall_s"], shares, bool(raw["flagged"]), passes)


@dataclass(frozen=True)
class RecommendationRecord:
    """What the run kept of ewif's recommendation (``realrun.side_by_side``): ``decision``
    under ``decision_rule`` (:mod:`ewif.predict.assurance`; files made before it: the mean's,
    None) and, where the rule needed it, the configuration's 90 % ``interval``."""

    decision: str
    best_speculative: str
    config: dict[str, Any]
    predicted_ewif: float
    describe: str
    review_sizes: list[dict[str, Any]]
    decision_rule: str | None = None
    interval: list[float] | None = None


@dataclass(frozen=True)
class Divergence:
    """Where a method's greedy output first differs from AR's, and the target's logit gap."""

    method: str
    prompt: int
    position: int
    ar_token: int | None
    method_token: int | None
    logit_gap: float | None


@dataclass(frozen=True)
class RunMetadata:
    """The metadata a results file's report reads, typed (:func:`run_metadata` reads it).

    ``run_acceptance``: per method, ``(ewif, |pred/meas − 1|)`` with the run's own acceptance
    rates; ``in_run_passes``: per method, model and ``m``; ``timing_gaps``: every
    :class:`TimingGap`; ``intervals``/``replays``: per method; ``measuring_prompts``: how
    many prompts the model set was measured on (None: not recorded); ``ar_at_context``:
    ``(tokens, seconds per AR token)`` where c(m, L) moved the unit to the run's mean
    context (``run_context_tokens``, the reference of ``ar_agreement``), else None."""

    interrupted: bool
    model_set: StoredModelSet | None
    model_set_dict: dict[str, Any]
    run_acceptance: dict[str, tuple[float, float]]
    in_run_passes: dict[str, dict[str, dict[str, PassTime]]]
    intervals: dict[str, Interval]
    replays: dict[str, Interval]
    timing_gaps: list[TimingGap]
    interval_coverage: float | None
    wall_time: dict[str, WallSplit]
    median_prediction_error: float | None
    recommendation: RecommendationRecord | None
    outputs_differing: dict[str, int]
    divergences: list[Divergence]
    measuring_prompts: int | None = None
    ar_at_context: tuple[float, float] | None = None


def run_metadata(metadata: Mapping[str, Any]) -> RunMetadata:
    """The one adapter from a results file's ``metadata`` mapping to :class:`RunMetadata`,
    old files included (module docstring); keys a run did not write are empty."""
    get = metadata.get
    stored = get("model_set") or {}
    rec = get("recommendation")
    return RunMetadata(
        interrupted=bool(get("interrupted")),
        model_set=_stored_model_set(stored) if stored else None,
        model_set_dict=dict(stored),
        run_acceptance={
            k: (v["ewif"], v["error"])
            for k, v in (get("prediction_with_run_acceptance") or {}).items()
        },
        in_run_passes={
            name: {model: _pass_times(by_m) for model, by_m in models.items()}
            for name, models in (get("in_run_pass_seconds") or {}).items()
        },
        intervals=_intervals(get("prediction_intervals")),
        replays=_intervals(get("replay_predictions")),
        timing_gaps=_timing_gaps(get("timing_agreement") or {}),
        interval_coverage=get("interval_coverage"),
        wall_time={k: WallSplit.read(v) for k, v in (get("wall_time_split") or {}).items()},
        median_prediction_error=get("median_prediction_error"),
        recommendation=RecommendationRecord(**rec) if rec else None,
        outputs_differing=dict(get("outputs_differing_from_AR") or {}),
        divergences=[Divergence(**d) for d in get("divergences") or []],
        measuring_prompts=len(get("measuring_prompt_ids") or []) or None,
        ar_at_context=_ar_at_context(get("run_context_tokens"), get("ar_agreement")),
    )


def _ar_at_context(tokens: Any, agreement: Any) -> tuple[float, float] | None:
    """The unit at the run's context (:attr:`RunMetadata.ar_at_context`)."""
    if tokens is None or not agreement:
        return None
    return float(tokens), float(agreement["timed_s_per_token"])


def _stored_model_set(stored: Mapping[str, Any]) -> StoredModelSet:
    meta = stored.get("metadata") or {}
    timing = {
        name: TimedGrid(
            tuple(t["m"]), tuple(t["seconds"]), t.get("row_seconds"), t.get("row_seconds_stderr")
        )
        for name, t in (meta.get("timing") or {}).items()
        if isinstance(t, Mapping) and "m" in t
    }
    ar = None
    if meta.get("ar_seconds_per_token"):
        ar = ARReference(meta["ar_seconds_per_token"], "ar")
    elif meta.get("target_one_token_pass_s"):  # files before the AR unit
        ar = ARReference(meta["target_one_token_pass_s"], "pass")
    row_cost = stored.get("row_cost")
    return StoredModelSet(
        tuple(stored.get("models") or ()),
        None if not row_cost else tuple(row_cost),
        timing,
        ar,
        meta.get("numerics_choice"),
    )


def _pass_times(by_m: Mapping[str, Mapping[str, Any]]) -> dict[str, PassTime]:
    """Per ``m``: the mean pass time, or the median in files before the mean (a method's
    sizes share one statistic: the median as soon as one size lacks the mean)."""
    stat = "mean" if all("mean_s" in v for v in by_m.values()) else "median"
    return {m: PassTime(v["passes"], v[f"{stat}_s"], stat) for m, v in by_m.items()}


def _timing_gaps(raw: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[TimingGap]:
    """Every size of every model; the priced mean is ``timed_mean_s`` in older files."""
    return [
        TimingGap(
            model=model,
            m=m,
            error=v["error"],
            relative_error=v.get("relative_error"),
            run_mean_s=v["run_mean_s"],
            priced_mean_s=v.get("priced_mean_s", v.get("timed_mean_s")),
            passes=v["passes"],
            run_context=v.get("run_context"),
        )
        for model, by_m in raw.items()
        for m, v in by_m.items()
    ]


def _intervals(raw: Mapping[str, Mapping[str, Any]] | None) -> dict[str, Interval]:
    """Bootstrap intervals or replays by method; unknown keys (``held_out_prompts`` absent
    in files before prediction intervals) read as None."""
    fields = set(Interval.__dataclass_fields__)
    return {
        name: Interval(**{k: v[k] for k in fields if k in v}) for name, v in (raw or {}).items()
    }
