"""Human-readable tables of a real-model run (:class:`ewif.files.results.Results`) and a model
set."""

from __future__ import annotations

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from ewif.search import explain


def _f(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _timed_seconds(ms_meta: dict, model: str | None):
    """``m -> seconds`` of ``model``'s pass as the measuring phase timed it (its mean,
    interpolated on the timed grid); None when the file has no timing of it."""
    grid = ((ms_meta.get("metadata") or {}).get("timing") or {}).get(model) if model else None
    if not grid or "m" not in grid:
        return None
    return lambda m: float(np.interp(m, grid["m"], grid["seconds"]))


def format_results(results: Results) -> str:
    """One row per method: tokens/s, speed-up vs AR, ewif prediction, |pred/meas − 1|, SWI,
    mean accepted length (bonus included); then acceptance by position of sd/csd methods."""
    head = (
        f"{results.family} on {results.device}: {results.prompts} prompts, "
        f"max_new_tokens={results.max_new_tokens}, temperature="
        f"{results.decoding['temperature']:g}, top_p={results.decoding['top_p']:g}"
    )
    width = max(len(m.name) for m in results.methods)
    choice = results.metadata.get("model_set", {}).get("metadata", {}).get("numerics_choice")
    rows = [
        head,
        *([] if choice in (None, "given") else choice.splitlines()),
        f"{'method':<{width}}  tokens/s  speedup  predicted  |pred/meas-1|    SWI  accepted/step",
    ]
    for m in results.methods:
        err = m.prediction_error
        rows.append(
            f"{m.name:<{width}}  {m.tokens_per_s:8.3f}  {_f(m.speedup):>7}  "
            f"{_f(m.predicted_speedup):>9}  {_f(None if err is None else 100 * err, '.1f'):>12}%"
            f"  {_f(m.swi):>5}  {_f(m.mean_accepted_length, '.2f'):>13}"
        )
    for m in results.methods:
        curves = m.acceptance_by_position
        if curves:
            shown = min(8, len(curves["measured"]))
            meas = " ".join(f"{v:.2f}" for v in curves["measured"][:shown])
            rows.append(f"P(position i accepted), {m.name}: measured {meas}")
            if "predicted" in curves:
                pred = " ".join(f"{v:.2f}" for v in curves["predicted"][:shown])
                rows.append(
                    f"{'':>{len('P(position i accepted), ') + len(m.name)}}  ewif     {pred}"
                )
    ms_meta = results.metadata.get("model_set", {})
    set_meta = ms_meta.get("metadata") or {}
    t_ar = set_meta.get("ar_seconds_per_token")
    ar = results.autoregressive
    if ar is not None and (t_ar or set_meta.get("target_one_token_pass_s")):
        what = (
            f"the measuring phase's AR ({1000 * t_ar:.1f} ms per token)"
            if t_ar
            else "the measured one-token pass of the target "
            f"({1000 * set_meta['target_one_token_pass_s']:.1f} ms)"  # files before the AR unit
        )
        predicted = 1 / (t_ar or set_meta["target_one_token_pass_s"])
        rows.append(
            f"AR measured {ar.tokens_per_s:.3f} tokens/s; {what} predicts {predicted:.3f} "
            f"tokens/s ({100 * (ar.tokens_per_s / predicted - 1):+.1f}%)"
        )
    rows.extend(row_cost_lines(ms_meta))
    for name, v in results.metadata.get("prediction_with_run_acceptance", {}).items():
        rows.append(
            f"{name}: with the run's own acceptance rates ewif predicts "
            f"{v['ewif']:.3f} (|pred/meas-1| = {100 * v['error']:.1f}%: the cost model "
            "alone)"
        )
    target = (ms_meta.get("models") or [None])[0]
    for name, models in results.metadata.get("in_run_pass_seconds", {}).items():
        if ar is not None and name == ar.name:  # its passes are priced by the AR line above
            continue
        sizes = sorted(models.get(target, {}).items(), key=lambda kv: -kv[1]["passes"])[:3]
        timed = _timed_seconds(ms_meta, target)
        if not sizes or timed is None:
            continue
        stat = "mean_s" if all("mean_s" in v for _, v in sizes) else "median_s"  # old files
        parts = [
            f"m={size} {1000 * v[stat]:.1f} ms (timed {1000 * timed(int(size)):.1f})"
            for size, v in sizes
        ]
        rows.append(f"{name}: target passes in the run, {stat[:-2]}: " + ", ".join(parts))
    for name, v in results.metadata.get("prediction_intervals", {}).items():
        where = "inside" if v["inside"] else "outside"
        kind = (
            f"prediction interval for {v['held_out_prompts']} held-out prompts"
            if "held_out_prompts" in v
            else "bootstrap over measuring prompts"  # files before prediction intervals
        )
        rows.append(
            f"{name}: predicted {v['point']:.3f}× [{v['low']:.2f}, {v['high']:.2f}] "
            f"({100 * v['level']:.0f}% {kind}; measured {where})"
        )
    for name, v in results.metadata.get("replay_predictions", {}).items():
        rows.append(
            f"{name}: replaying the measuring traces predicts {v['point']:.3f}× "
            f"[{v['low']:.2f}, {v['high']:.2f}] (|pred/meas-1| = {100 * v['error']:.1f}%; "
            f"measured {'inside' if v['inside'] else 'outside'})"
        )
    agreement = results.metadata.get("timing_agreement") or {}
    worst = [
        (abs(v["error"]), model, m, v) for model, by_m in agreement.items() for m, v in by_m.items()
    ]
    if worst:
        _, model, m, v = max(worst)
        relative = [abs(v["relative_error"]) for _, _, _, v in worst if "relative_error" in v]
        priced = v.get("priced_mean_s", v["timed_mean_s"])
        rows.append(
            f"in-run vs priced mean pass: largest gap {100 * v['error']:+.1f}% ({model}, m={m}: "
            f"{1000 * v['run_mean_s']:.1f} vs {1000 * priced:.1f} ms, "
            f"{v['passes']} passes) over {len(worst)} sizes with >= 30 passes"
            + (
                f"; in units of each phase's AR token at most {100 * max(relative):.1f}%"
                if relative
                else ""
            )
        )
    coverage = results.metadata.get("interval_coverage")
    if coverage is not None:
        rows.append(f"measurements inside their interval: {100 * coverage:.0f}%")
    rows.extend(wall_time_lines(results.metadata.get("wall_time_split", {})))
    median = results.metadata.get("median_prediction_error")
    if median is not None:
        rows.append(f"median |predicted/measured - 1| over sd/csd methods: {100 * median:.1f}%")
    rec = results.metadata.get("recommendation")
    if rec:
        rows.append(rec["describe"])
        rows.extend(explain.review_lines(rec["review_sizes"]))
    diff = results.metadata.get("outputs_differing_from_AR")
    if diff:
        rows.append(
            "prompts whose output differs from AR: "
            + ", ".join(f"{k}={v}" for k, v in diff.items())
        )
    for d in results.metadata.get("divergences", []):
        gap = "-" if d["logit_gap"] is None else f"{d['logit_gap']:.4g}"
        rows.append(
            f"  {d['method']}: prompt {d['prompt']} first differs at token {d['position']}"
            f" (AR {d['ar_token']}, method {d['method_token']}; target logit gap {gap})"
        )
    if results.metadata.get("interrupted"):
        rows.append("(interrupted: partial results over the prompts finished)")
    return "\n".join(rows)


def row_cost_lines(model_set: dict) -> list[str]:
    """One line per drafter whose logit rows the model set prices (``row_cost``, a stored
    model set as a mapping): the row's cost in AR tokens and as timed, with its error."""
    timing = (model_set.get("metadata") or {}).get("timing") or {}
    row_cost = model_set.get("row_cost")
    if not row_cost:
        return []
    lines = []
    for name, h in zip(model_set["models"], row_cost, strict=True):
        if h:
            t = timing.get(name) or {}
            timed = (
                f" ({1000 * t['row_seconds']:.2f} ± {1000 * t['row_seconds_stderr']:.2f} ms as "
                "timed)"
                if "row_seconds" in t
                else ""
            )
            lines.append(
                f"{name}: one logit row costs {h:.4f} AR tokens{timed}, taken off each "
                "catch-up position (it returns none)"
            )
    return lines


def wall_time_lines(split: dict) -> list[str]:
    """Per method: where its wall time went (:mod:`realrun.books`), the residual flagged when
    above the threshold, and the mean against the median of its most frequent pass sizes."""
    rows = []
    for name, b in split.items():
        wall = b["wall_s"]
        share = {
            "passes": b["pass_s"],
            "call overhead": sum(b["call_overhead_s"].values()),
            "proposers": sum(b["proposer_s"].values()),
            "decoder": b["decoder_s"],
            "residual": b["residual_s"],
        }
        parts = ", ".join(f"{k} {100 * v / wall:.1f}%" for k, v in share.items()) if wall else ""
        flag = "  (residual above 3%: unexplained wall time)" if b["flagged"] else ""
        rows.append(f"{name}: wall {wall:.2f} s = {parts}{flag}")
        for model, by_m in b["passes"].items():
            top = sorted(by_m.items(), key=lambda kv: -kv[1]["count"])[:3]
            rows.append(
                f"  {model} passes: "
                + ", ".join(
                    f"m={m} ×{v['count']} mean {1000 * v['mean_s']:.1f} ms (median "
                    f"{1000 * v['median_s']:.1f}, p90 {1000 * v['p90_s']:.1f})"
                    for m, v in top
                )
            )
    return rows


def format_model_set(model_set: ModelSet) -> str:
    """Pass costs (in target one-token passes: the curve at a few ``m`` when the set has
    curves, else cost and cost per token) and α of every measured pair."""
    names = model_set.models
    width = max(len(n) for n in names)
    curves = model_set.cost_curve
    if curves is not None:
        shown = [m for m in (1, 2, 3, 4, 8, 12, 16, 24, 32) if m <= max(len(c) for c in curves)]
        rows = [f"{'model':<{width}}  pass cost at m = " + " ".join(f"{m:>6}" for m in shown)]
        for n, c in zip(names, curves, strict=True):
            vals = " ".join(f"{c[m - 1]:6.3f}" if m <= len(c) else f"{'':>6}" for m in shown)
            rows.append(f"{n:<{width}}  {'':>17}{vals}")
    else:
        rows = [f"{'model':<{width}}  cost   cost/token"]
        for n, c, t in zip(names, model_set.cost, model_set.cost_per_token, strict=True):
            rows.append(f"{n:<{width}}  {c:.4f} {t:.4f}")
    for lenience in model_set.leniences:
        mat = model_set.alpha[lenience]
        pairs = [
            f"{names[r]}<-{names[j]} {mat[r, j]:.3f}"
            for r in range(len(names))
            for j in range(r + 1, len(names))
            if not np.isnan(mat[r, j])
        ]
        rows.append(f"alpha (lenience {lenience:g}): " + ", ".join(pairs))
    return "\n".join([*rows, *row_cost_lines(model_set.to_dict())])
