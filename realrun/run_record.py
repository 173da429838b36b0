"""The results of a side-by-side run: every method's measurement next to ewif's prediction,
and the run's metadata (:class:`ewif.files.results.Results`).

Reported per method (:mod:`ewif.files.results`): ``tokens_per_s`` = tokens / seconds over all
prompts; ``speedup`` against AR of the same run; ``predicted_speedup`` = ewif's exact EWIF
of the configuration for the measured α and pass costs; ``swi`` = tokens·c_0(1) / Σ over
counted passes of c_i(m) (less a catch-up drafter's row cost per position without a row) —
the standardized walltime improvement from the passes the run actually made, each priced
at its own size m (Max-Gram: every proposed token one pass at m = 1);
``mean_accepted_length`` = tokens per target step, bonus token included (vLLM's convention;
AR = 1); acceptance by draft position at the target,
measured ``P(position i exists and is accepted)`` (accepted count / target steps) next to
ewif's :meth:`~ewif.kernel.cascade.Cascade.acceptance_by_position`. Greedy runs also record, per
method, on how many prompts the output differs from AR's (0 expected: lossless).

``metadata.counted_passes`` keeps, per sd/csd method and
model, the passes, the positions and the passes by size m counted, so a run can be re-priced
with another cost model; ``metadata.in_run_pass_seconds`` the mean and median wall time of
those passes by size m (the in-run cost curve, to set against the measured one);
``metadata.prediction_intervals`` the 90 % bootstrap prediction interval of every sd/csd
speed-up on the run's held-out prompts (resampling measuring prompts, plus the sampling of
as many held-out prompts, :mod:`ewif.predict.bootstrap`) with whether the measurement fell inside,
``metadata.interval_coverage`` the share that did; ``metadata.wall_time_split`` every
method's wall time split into passes, call overhead, proposers, the decoder's own work and
the residual (:mod:`realrun.books`; methods our decoder runs). The predictions themselves
are :mod:`realrun.predictions`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.files.results import MethodResult, Results, with_speedups
from ewif.kernel.cascade import Cascade
from realrun import books
from realrun.methods import Method, ar_name
from realrun.predictions import (
    ewif_with_run_acceptance,
    interval_coverage,
    method_intervals,
    replay_predictions,
)
from realrun.tally import MethodTally
from realrun.tree_methods import method_cascade
from simulate.decoder.sampling import Decoding


def run_results(
    methods: list[Method],
    tallies: Mapping[str, MethodTally],
    model_set: ModelSet,
    done: int,
    max_new_tokens: int,
    decoding: Decoding,
    device: str,
    family: str,
    interrupted: bool,
) -> Results:
    """The run's :class:`~ewif.files.results.Results`: one :class:`MethodResult` per method and the
    metadata of the module docstring."""
    ar = ar_name(methods)
    ar_out = tallies[ar].outputs if ar is not None else None
    out, mismatches, in_run = [], {}, {}
    lengths = {m.name: [len(o) for o in tallies[m.name].outputs] for m in methods}
    for m in methods:
        t = tallies[m.name]
        cascade = None
        if m.kind in ("sd", "csd"):
            cascade = method_cascade(model_set, m)
            if m.tree is None and t.stats is not None and t.stats.target_steps:
                in_run[m.name] = ewif_with_run_acceptance(cascade, t.stats, lengths[m.name])
        out.append(_method_result(m, t, model_set.pass_cost.unit, cascade, lengths[m.name]))
        if ar_out is not None and decoding.greedy:
            mismatches[m.name] = sum(a != b for a, b in zip(t.outputs, ar_out, strict=True))
    metadata = {
        "interrupted": interrupted,
        "timing": "decoding wall time; prompt prefill excluded (see realrun.side_by_side)",
        "mean_accepted_length": "tokens per target step, bonus token included (vLLM)",
        "outputs_differing_from_AR": mismatches,
        "accepted_token_sources": {
            m.name: dict(st.sources)
            for m in methods
            if (st := tallies[m.name].stats) is not None and st.sources
        },
        "counted_passes": _counted_passes(methods, tallies),
        "in_run_pass_seconds": _in_run_pass_seconds(methods, tallies),
        "wall_time_split": _wall_time_split(methods, tallies),
        "model_set": model_set.to_dict(),
        "generation_lengths": lengths,
    }
    results = Results(
        device=device,
        family=family,
        prompts=done,
        max_new_tokens=max_new_tokens,
        decoding={"temperature": decoding.temperature, "top_p": decoding.top_p},
        methods=with_speedups(out),
        metadata=metadata,
    )
    metadata["prediction_with_run_acceptance"] = {
        m.name: {"ewif": in_run[m.name], "error": abs(in_run[m.name] / m.speedup - 1.0)}
        for m in results.methods
        if m.name in in_run and m.speedup
    }
    if model_set.bootstrap is not None:
        intervals = method_intervals(results, model_set)
        metadata["prediction_intervals"] = intervals
        metadata["interval_coverage"] = interval_coverage(intervals)
        if model_set.bootstrap.acceptance_traces is not None:
            replays = replay_predictions(results, model_set)
            metadata["replay_predictions"] = replays
            metadata["replay_coverage"] = interval_coverage(replays)
    return results


def _method_result(
    m: Method, t: MethodTally, unit: float, cascade: Cascade | None, lengths: list[int]
) -> MethodResult:
    """What ``m`` measured (``t``) next to what ewif predicts for it (``cascade``, sd/csd, on
    generations of the ``lengths`` it made, Theorem FL); ``unit``: the standardized cost of
    one autoregressive target token."""
    predicted = swi = mal = curves = None
    if m.kind == "autoregressive":
        predicted, swi, mal = 1.0, 1.0, 1.0
    elif cascade is not None:
        predicted = float(cascade.ewif(lengths))
        swi = t.tokens * unit / t.weighted_cost if t.weighted_cost > 0 else None
        if t.stats is not None and t.stats.target_steps:
            mal = float(t.stats.mean_accepted_length)
            accepted = t.stats.target_position_counts[1]
            if accepted.size:
                curves = {
                    "measured": (accepted / t.stats.target_steps).tolist(),
                    "predicted": cascade.acceptance_by_position(accepted.size).tolist(),
                }
    return MethodResult(
        name=m.name,
        kind=m.kind,
        tokens_per_s=t.tokens / t.seconds if t.seconds > 0 else 0.0,
        speedup=None,
        predicted_speedup=predicted,
        swi=swi,
        mean_accepted_length=mal,
        acceptance_by_position=curves,
        config=m.config,
        tokens=t.tokens,
        seconds=t.seconds,
    )


def _counted_passes(methods: list[Method], tallies: Mapping[str, MethodTally]) -> dict:
    """``metadata.counted_passes``: per method and model, passes, positions and passes by m."""
    return {
        m.name: {
            k: {
                "passes": v.total(),
                "positions": sum(s * c for s, c in v.items()),
                "by_m": {str(s): c for s, c in sorted(v.items())},
            }
            for k, v in tallies[m.name].counted.items()
        }
        for m in methods
        if tallies[m.name].counted
    }


def _in_run_pass_seconds(methods: list[Method], tallies: Mapping[str, MethodTally]) -> dict:
    """``metadata.in_run_pass_seconds``: per method, model and size m, the passes, their
    mean and median wall time, the mean logit rows they returned, the share that returned
    one and the mean cached context they ran after (``mean_context``)."""
    out = {}
    for m in methods:
        t = tallies[m.name]
        if not t.pass_seconds:
            continue
        out[m.name] = {
            model: {
                str(size): {
                    "passes": len(v),
                    "mean_s": float(np.mean(v)),
                    "median_s": float(np.median(v)),
                    "rows": t.counted_rows[model][size] / t.counted[model][size],
                    "one_row_share": t.counted_one_row.get(model, {}).get(size, 0)
                    / t.counted[model][size],
                    "mean_context": t.counted_context.get(model, {}).get(size, 0)
                    / t.counted[model][size],
                }
                for size, v in sorted(by_m.items())
            }
            for model, by_m in t.pass_seconds.items()
        }
    return out


def _wall_time_split(methods: list[Method], tallies: Mapping[str, MethodTally]) -> dict:
    """``metadata.wall_time_split``: the books of every method our decoder ran
    (:func:`realrun.books.split`)."""
    return {
        m.name: books.split(
            t.seconds,
            m.models,
            [name in t.pass_seconds for name in m.models],
            t.pass_seconds,
            t.stats.call_seconds,
            t.stats.decode_seconds,
        ).to_dict()
        for m in methods
        if (t := tallies[m.name]).stats is not None and t.stats.call_seconds
    }
