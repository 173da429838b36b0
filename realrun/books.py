"""Close the books on a method's wall time: every second of decoding, put in its place.

A run of our decoder times, besides its total wall time ``W``,

* every forward pass of every neural model (its ``timing_hook``: forward and host copy), by
  the positions ``m`` it fed;
* the whole of each model's ``logits`` call and each proposer's ``propose`` call
  (:attr:`~simulate.decoder.cascade.CascadeStats.call_seconds`);
* the decoder's own verification and sampling
  (:attr:`~simulate.decoder.cascade.CascadeStats.decode_seconds`).

So ``W = Σ passes + Σ call overhead (cache crop, prefix match, checks) + Σ proposers +
decoder + residual``, where the residual is what none of the timers saw (the loop's own list
work, the interpreter, the clock). :func:`split` computes the split; a residual above
:data:`RESIDUAL_FLAG` of ``W`` is flagged. Pass times are summarised per ``m`` by count,
**mean** (what the run pays: expected cost is a mean), median and p90.
:func:`timing_agreement` sets the run's mean pass times against the ones the measuring
phase timed, model by model and size by size — the passes a cost curve prices, so an
autoregressive method's passes are left out: a prediction prices them by the autoregressive
reference, timed as a stretch of its own, which :func:`ar_agreement` sets against the run's
autoregressive method.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: Share of the wall time above which the unexplained residual is flagged.
RESIDUAL_FLAG = 0.03


@dataclass(frozen=True)
class PassSummary:
    """Wall times of one model's passes over ``m`` positions."""

    count: int
    mean_s: float
    median_s: float
    p90_s: float
    total_s: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> PassSummary:
        s = np.asarray(seconds, dtype=float)
        if s.size == 0 or not np.isfinite(s).all() or (s < 0).any():
            raise ValueError(
                f"pass times must be a non-empty list of seconds >= 0, got {list(seconds)!r}"
            )
        return cls(
            int(s.size),
            float(s.mean()),
            float(np.median(s)),
            float(np.quantile(s, 0.9)),
            float(s.sum()),
        )


@dataclass(frozen=True)
class WallTimeSplit:
    """One method's wall time, split (module docstring); seconds over all its prompts."""

    wall_s: float
    passes: dict[str, dict[int, PassSummary]]
    call_overhead_s: dict[str, float]
    proposer_s: dict[str, float]
    decoder_s: float

    @property
    def pass_s(self) -> float:
        return sum(p.total_s for by_m in self.passes.values() for p in by_m.values())

    @property
    def residual_s(self) -> float:
        return (
            self.wall_s
            - self.pass_s
            - sum(self.call_overhead_s.values())
            - sum(self.proposer_s.values())
            - self.decoder_s
        )

    @property
    def residual_share(self) -> float:
        return self.residual_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def flagged(self) -> bool:
        """True when the residual exceeds :data:`RESIDUAL_FLAG` of the wall time."""
        return abs(self.residual_share) > RESIDUAL_FLAG

    def to_dict(self) -> dict:
        return {
            "wall_s": self.wall_s,
            "passes": {
                name: {str(m): vars(p) for m, p in sorted(by_m.items())}
                for name, by_m in self.passes.items()
            },
            "pass_s": self.pass_s,
            "call_overhead_s": dict(self.call_overhead_s),
            "proposer_s": dict(self.proposer_s),
            "decoder_s": self.decoder_s,
            "residual_s": self.residual_s,
            "residual_share": self.residual_share,
            "flagged": self.flagged,
        }


def split(
    wall_s: float,
    names: Sequence[str],
    neural: Sequence[bool],
    pass_seconds: Mapping[str, Mapping[int, Sequence[float]]],
    call_seconds: Sequence[float],
    decoder_s: float,
) -> WallTimeSplit:
    """The :class:`WallTimeSplit` of one method's models ``names`` (target first):
    ``neural[i]`` tells a timed model from a proposer, ``pass_seconds[name][m]`` lists the
    model's pass times, ``call_seconds[i]`` its calls' total, ``decoder_s`` the decoder's own
    verification and sampling."""
    if len(call_seconds) != len(names) or len(neural) != len(names):
        raise ValueError(
            f"call_seconds and neural need one entry per model ({len(names)}), got "
            f"{len(call_seconds)} and {len(neural)}"
        )
    for label, value in (
        ("wall_s", wall_s),
        ("decoder_s", decoder_s),
        *zip((f"call_seconds[{i}]" for i in range(len(names))), call_seconds, strict=True),
    ):
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"{label} must be a finite number of seconds >= 0, got {value!r}")
    passes, overhead, proposers = {}, {}, {}
    for name, timed, total in zip(names, neural, call_seconds, strict=True):
        if not timed:
            proposers[name] = float(total)
            continue
        passes[name] = {int(m): PassSummary.of(v) for m, v in pass_seconds.get(name, {}).items()}
        overhead[name] = float(total) - sum(p.total_s for p in passes[name].values())
    return WallTimeSplit(float(wall_s), passes, overhead, proposers, float(decoder_s))


#: Passes of one size a run needs before its in-run mean is set against the timed one.
MIN_PASSES = 30


def timing_agreement(
    in_run: Mapping,
    timing: Mapping,
    run_ar_s: float | None = None,
    timed_ar_s: float | None = None,
    priced_by_ar: Collection[str] = (),
    row_seconds: Mapping[str, float] | None = None,
    step_seconds: Mapping[str, float] | None = None,
    timed_at: Callable[[str, int, float], float] | None = None,
) -> dict[str, dict[str, dict]]:
    """The in-run mean pass time of every model and size ``m`` (``in_run``: a results file's
    ``metadata.in_run_pass_seconds``, pooled over the methods but those named in
    ``priced_by_ar``, whose passes no curve prices) against what the model set prices them
    at: the measuring phase's timed mean at that ``m`` (``timing``: the model set's
    ``metadata.timing``, interpolated on its grid, all logit rows), less ``h·(m − rows)``
    where the run recorded its passes' mean logit rows (``run_rows``) and ``row_seconds``
    gives the model's priced row cost ``h`` in seconds (a catch-up drafter's,
    :mod:`ewif.kernel.pass_cost`; then ``priced_mean_s``), and less ``s`` times the share of
    them that returned one row where ``step_seconds`` gives its row step ``s`` and the run
    recorded that share (``one_row_share``). ``{model: {m: {passes, run_mean_s,
    timed_mean_s, error, …}}}`` with ``error = run/priced − 1``, for sizes with at least
    :data:`MIN_PASSES` passes. Given the seconds of one AR token in the run (``run_ar_s``)
    and in the measuring phase (``timed_ar_s``), also ``relative_error``: the same comparison
    with each pass in units of its own phase's AR token — what a prediction uses, blind to a
    drift of the machine's speed between the two phases. Where the run recorded the mean
    cached context its passes of a size ran after (``mean_context``; ``run_context`` in the
    entry) and ``timed_at(model, m, L)`` gives the measuring phase's seconds of that pass at
    context ``L`` (c(m, L), :mod:`realrun.run_context`), the timed mean is taken there: a
    size whose passes fall at long contexts (a catch-up after an accepted Max-Gram token, in
    an answer copied from a long document) is compared with its cost at those contexts."""
    pooled: dict[str, dict[int, list[float]]] = {}
    for method, per_model in in_run.items():
        if method in priced_by_ar:
            continue
        for model, by_m in per_model.items():
            for size, v in by_m.items():
                total = pooled.setdefault(model, {}).setdefault(int(size), [0, 0.0, 0.0, 0.0, 0.0])
                total[0] += v["passes"]
                total[1] += v["passes"] * v["mean_s"]
                total[2] += v["passes"] * v["rows"] if "rows" in v else math.nan
                total[3] += v["passes"] * v.get("one_row_share", 0.0)
                total[4] += v["passes"] * v.get("mean_context", math.nan)
    out: dict[str, dict[str, dict]] = {}
    for model, by_m in pooled.items():
        grid = timing.get(model) or {}
        if "m" not in grid:
            continue
        h = (row_seconds or {}).get(model, 0.0)
        step = (step_seconds or {}).get(model, 0.0)
        for size, (passes, seconds, rows, ones, context) in sorted(by_m.items()):
            if passes < MIN_PASSES or size > grid["m"][-1]:
                continue
            run = seconds / passes
            timed = float(np.interp(size, grid["m"], grid["seconds"]))
            row = {"passes": passes, "run_mean_s": run, "timed_mean_s": timed}
            if timed_at is not None and math.isfinite(context):
                row["run_context"] = context / passes
                timed = row["timed_mean_s"] = timed_at(model, size, row["run_context"])
            priced = timed
            if math.isfinite(rows):
                row["run_rows"] = rows / passes
                if h or step:
                    saved = h * (size - row["run_rows"]) + step * ones / passes * (size >= 2)
                    priced = row["priced_mean_s"] = timed - saved
            row["error"] = run / priced - 1.0
            if run_ar_s and timed_ar_s:
                row["relative_error"] = (run / run_ar_s) / (priced / timed_ar_s) - 1.0
            out.setdefault(model, {})[str(size)] = row
    return out


def ar_agreement(run_ar_s: float, timed_ar_s: float) -> dict[str, float]:
    """The run's autoregressive seconds per token (``run_ar_s``) against the measuring
    phase's autoregressive reference (``timed_ar_s``), the unit every cost curve is priced
    in: ``{run_s_per_token, timed_s_per_token, error}`` with ``error = run/timed − 1``."""
    for label, value in (("run_ar_s", run_ar_s), ("timed_ar_s", timed_ar_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{label} must be a number of seconds, got {value!r}")
        if not np.isfinite(value) or value <= 0:
            raise ValueError(f"{label} must be a finite number of seconds > 0, got {value!r}")
    return {
        "run_s_per_token": float(run_ar_s),
        "timed_s_per_token": float(timed_ar_s),
        "error": run_ar_s / timed_ar_s - 1.0,
    }
