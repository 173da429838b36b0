"""Human-readable tables of a real-model run (:class:`ewif.files.results.Results`); a model
set's are :mod:`realrun.model_set_tables`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from ewif.files.run_metadata import RunMetadata, WallSplit
from ewif.search import explain
from ewif.search.mix import alpha_by_category_table
from realrun.categories import differing_lines, outputs_differing_by_category
from realrun.model_set_tables import row_cost_lines
from realrun.peers import peer_comparison

Section = Callable[[Results, RunMetadata], list[str]]


def _f(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def format_results(results: Results) -> str:
    """The report of a run: one small renderer per section (:data:`SECTIONS`, in order),
    each over the typed metadata (:attr:`ewif.files.results.Results.meta`)."""
    meta = results.meta
    return "\n".join(line for section in SECTIONS for line in section(results, meta))


def heading(results: Results, meta: RunMetadata) -> list[str]:
    """The setting, and how the numerics were chosen (when they were measured)."""
    choice = meta.model_set.numerics_choice if meta.model_set else None
    return [
        f"{results.family} on {results.device}: {results.prompts} prompts, "
        f"max_new_tokens={results.max_new_tokens}, temperature="
        f"{results.decoding['temperature']:g}, top_p={results.decoding['top_p']:g}",
        *([] if choice in (None, "given") else choice.splitlines()),
    ]


def method_table(results: Results, meta: RunMetadata) -> list[str]:
    """One row per method: tokens/s, speed-up vs AR, ewif's prediction, |pred/meas − 1|,
    SWI and the mean accepted length (bonus included)."""
    width = max(len(m.name) for m in results.methods)
    rows = [
        f"{'method':<{width}}  tokens/s  speedup  predicted  |pred/meas-1|    SWI  accepted/step"
    ]
    for m in results.methods:
        err = m.prediction_error
        rows.append(
            f"{m.name:<{width}}  {m.tokens_per_s:8.3f}  {_f(m.speedup):>7}  "
            f"{_f(m.predicted_speedup):>9}  {'-' if err is None else f'{100 * err:.1f}%':>13}"
            f"  {_f(m.swi):>5}  {_f(m.mean_accepted_length, '.2f'):>13}"
        )
    return rows


def acceptance_curves(results: Results, meta: RunMetadata) -> list[str]:
    """P(position i accepted) of every sd/csd method, measured over ewif's (8 positions)."""
    rows = []
    for m in results.methods:
        curves = m.acceptance_by_position
        if not curves:
            continue
        shown = min(8, len(curves["measured"]))
        head = f"P(position i accepted), {m.name}: "
        rows.append(head + "measured " + " ".join(f"{v:.2f}" for v in curves["measured"][:shown]))
        if "predicted" in curves:
            pred = " ".join(f"{v:.2f}" for v in curves["predicted"][:shown])
            rows.append(f"{'':>{len(head) - 2}}  ewif     {pred}")
    return rows


def ar_reference(results: Results, meta: RunMetadata) -> list[str]:
    """The run's AR against what the measuring phase's AR reference predicts for it."""
    ar, ref = results.autoregressive, meta.model_set and meta.model_set.ar_reference
    if ar is None or not ref:
        return []
    what = (
        f"the measuring phase's AR ({1000 * ref.seconds:.1f} ms per token)"
        if ref.kind == "ar"
        else f"the measured one-token pass of the target ({1000 * ref.seconds:.1f} ms)"
    )
    line = f"AR measured {ar.tokens_per_s:.3f} tokens/s; {what} predicts " + _vs(ar, ref.seconds)
    if meta.ar_at_context is not None:  # the unit the run's predictions were priced in
        tokens, seconds = meta.ar_at_context
        line += f"; c(m, L) at the run's mean context, {tokens:.0f} tokens, predicts "
        line += _vs(ar, seconds)
    return [line]


def _vs(ar, seconds: float) -> str:
    """``predicts X tokens/s (±%)``: AR's speed ``1/seconds`` against the measured."""
    return f"{1 / seconds:.3f} tokens/s ({100 * (ar.tokens_per_s * seconds - 1):+.1f}%)"


def row_costs(results: Results, meta: RunMetadata) -> list[str]:
    """The priced logit-row cost of every catch-up drafter (:func:`row_cost_lines`)."""
    return row_cost_lines(meta.model_set_dict)


def run_acceptance(results: Results, meta: RunMetadata) -> list[str]:
    """ewif with the run's own acceptance rates: the error of the cost model alone."""
    return [
        f"{name}: with the run's own acceptance rates ewif predicts {ewif:.3f} "
        f"(|pred/meas-1| = {100 * error:.1f}%: the cost model alone)"
        for name, (ewif, error) in meta.run_acceptance.items()
    ]


def target_passes(results: Results, meta: RunMetadata) -> list[str]:
    """Per method, the target's three most frequent pass sizes in the run against the
    times the measuring phase timed (the AR method's passes are priced by the AR line)."""
    ar = results.autoregressive
    stored = meta.model_set
    target = stored.models[0] if stored and stored.models else None
    timed = stored.timing.get(target) if stored and target else None
    rows = []
    for name, models in meta.in_run_passes.items():
        if (ar is not None and name == ar.name) or timed is None:
            continue
        sizes = sorted(models.get(target, {}).items(), key=lambda kv: -kv[1].passes)[:3]
        if not sizes:
            continue
        parts = [
            f"m={size} {1000 * v.seconds:.1f} ms (timed {1000 * timed.at(int(size)):.1f})"
            for size, v in sizes
        ]
        rows.append(
            f"{name}: target passes in the run, {sizes[0][1].statistic}: " + ", ".join(parts)
        )
    return rows


def intervals(results: Results, meta: RunMetadata) -> list[str]:
    """Each method's prediction with its interval, and whether the measurement fell inside."""
    rows = []
    for name, v in meta.intervals.items():
        kind = (
            f"prediction interval for {v.held_out_prompts} held-out prompts"
            if v.held_out_prompts is not None
            else "bootstrap over measuring prompts"  # files before prediction intervals
        )
        if v.unseen_categories:
            kind += f", {', '.join(v.unseen_categories)} drawn as categories never measured"
        rows.append(
            f"{name}: predicted {v.point:.3f}× [{v.low:.2f}, {v.high:.2f}] "
            f"({100 * v.level:.0f}% {kind}; measured {'inside' if v.inside else 'outside'})"
        )
    return rows


def replays(results: Results, meta: RunMetadata) -> list[str]:
    """What replaying the measuring traces predicts for each method."""
    return [
        f"{name}: replaying the measuring traces predicts {v.point:.3f}× "
        f"[{v.low:.2f}, {v.high:.2f}] (|pred/meas-1| = {100 * v.error:.1f}%; "
        f"measured {'inside' if v.inside else 'outside'})"
        for name, v in meta.replays.items()
    ]


def timing_gap(results: Results, meta: RunMetadata) -> list[str]:
    """The largest gap between a mean pass in the run and the priced one."""
    gaps = meta.timing_gaps
    if not gaps:
        return []
    g = max(gaps, key=lambda g: (abs(g.error), g.model, g.m))
    relative = [abs(x.relative_error) for x in gaps if x.relative_error is not None]
    return [
        f"in-run vs priced mean pass: largest gap {100 * g.error:+.1f}% ({g.model}, m={g.m}: "
        f"{1000 * g.run_mean_s:.1f} vs {1000 * g.priced_mean_s:.1f} ms, "
        f"{g.passes} passes"
        + (f" after {g.run_context:.0f} cached tokens on average" if g.run_context else "")
        + f") over {len(gaps)} sizes with >= 30 passes"
        + (
            f"; in units of each phase's AR token at most {100 * max(relative):.1f}%"
            if relative
            else ""
        )
    ]


def coverage(results: Results, meta: RunMetadata) -> list[str]:
    """The share of measurements inside their interval."""
    if meta.interval_coverage is None:
        return []
    return [f"measurements inside their interval: {100 * meta.interval_coverage:.0f}%"]


def wall_time(results: Results, meta: RunMetadata) -> list[str]:
    """Where each method's wall time went (:func:`wall_time_lines`)."""
    return wall_time_lines(meta.wall_time)


def median_error(results: Results, meta: RunMetadata) -> list[str]:
    """The median prediction error over sd/csd methods."""
    median = meta.median_prediction_error
    if median is None:
        return []
    return [f"median |predicted/measured - 1| over sd/csd methods: {100 * median:.1f}%"]


def recommendation(results: Results, meta: RunMetadata) -> list[str]:
    """ewif's recommendation from the measuring split (its EWIF for unbounded generations;
    the table's prediction is for the generations the run made) and the review sizes it
    relies on."""
    rec = meta.recommendation
    if rec is None:
        return []
    return [
        f"ewif's recommendation from the measuring split (EWIF of unbounded generations): "
        f"{rec.describe}",
        *explain.review_lines(rec.review_sizes),
    ]


def tree_search(results: Results, meta: RunMetadata) -> list[str]:
    """The token-tree search's decision and configurations (``--trees``), and how a
    tree-shaped pass's time compares with a chain pass of the same size."""
    rec = results.metadata.get("tree_recommendation")
    if not rec:
        return []
    rows = [f"token trees: the exact tree search says {rec['decision']}"]
    for key, label in (("best", "best"), ("best_tree", "best tree"), ("best_chain", "best chain")):
        entry = rec.get(key)
        if entry:
            ewif = entry["predicted_ewif"]
            rows.append(f"  {label:<10}: {entry['method']} at {ewif:.3f}x (ewif)")
    for name, t in results.metadata.get("tree_pass_timing", {}).items():
        ratios = ", ".join(f"{m}: {r:.3f}" for m, r in zip(t["m"], t["ratio"], strict=True))
        rows.append(f"  tree/chain pass time, {name}: mean {t['mean_ratio']:.3f} (m {ratios})")
    return rows


def peer_schedules(results: Results, meta: RunMetadata) -> list[str]:
    """Whether a peer measured faster than our fastest sd/csd method, and whether a dynamic
    draft length (transformers' schedules) beats our fixed k on this run's traces at our
    costs (:func:`realrun.peers.peer_comparison`)."""
    out = peer_comparison(results)
    if out is None:
        return []
    verb = "beat" if out["peer_won"] else "did not beat"
    rows = [
        f"peer: {out['peer']} ({out['peer_speedup']:.3f}x) {verb} our fastest speculative "
        f"method, {out['ours']} ({out['ours_speedup']:.3f}x)"
    ]
    prices = out.get("schedules_at_our_costs")
    if prices:
        fixed = next(name for name in prices if name.startswith("fixed"))
        best = max(prices, key=prices.__getitem__)
        priced = ", ".join(f"{name} {value:.3f}x" for name, value in prices.items())
        rows.append(
            "  its draft schedules replayed on our traces at our costs: "
            f"{priced}; {'none beats' if best == fixed else best + ' beats'} our {fixed}"
        )
    return rows


def differing_outputs(results: Results, meta: RunMetadata) -> list[str]:
    """How many prompts' outputs differ from AR's, per method, and where each first did."""
    rows = []
    if meta.outputs_differing:
        rows.append(
            "prompts whose output differs from AR: "
            + ", ".join(f"{k}={v}" for k, v in meta.outputs_differing.items())
        )
    for d in meta.divergences:
        gap = "-" if d.logit_gap is None else f"{d.logit_gap:.4g}"
        rows.append(
            f"  {d.method}: prompt {d.prompt} first differs at token {d.position}"
            f" (AR {d.ar_token}, method {d.method_token}; target logit gap {gap})"
        )
    return rows


def categories(results: Results, meta: RunMetadata) -> list[str]:
    """α per category of the measuring prompts, the categories held out whole, and outputs
    differing from AR by category (:mod:`realrun.categories`)."""
    raw = meta.model_set_dict
    if not raw.get("alpha_by_category"):
        return []
    rows = ["α per category (measuring prompts; the target's acceptance at lenience 1):"]
    rows += alpha_by_category_table(ModelSet.from_dict(raw, "run")).splitlines()
    held = results.metadata.get("held_out_categories")
    if held:
        rows.append(f"held out whole (absent from the measuring split): {', '.join(held)}")
    differing = differing_lines(outputs_differing_by_category(results))
    return rows + (["outputs differing from AR, by category:", *differing] if differing else [])


def interrupted(results: Results, meta: RunMetadata) -> list[str]:
    """A note when the run was interrupted."""
    return ["(interrupted: partial results over the prompts finished)"] if meta.interrupted else []


def decision(results: Results, meta: RunMetadata) -> list[str]:
    """The one line the report leads with: the fastest of AR and our methods (sd/csd) as
    measured on the held-out prompts, with ewif's prediction of it, and where ewif's
    recommendation (from the measuring split, below) said otherwise."""
    ours = _ours(results)
    if results.autoregressive is None or not ours:
        return []
    best, rec, n = max(ours, key=lambda m: m.speedup), meta.recommendation, results.prompts
    partial = " (interrupted: partial run)" if meta.interrupted else ""
    said = f"predicted {_f(best.predicted_speedup)}x"
    if best.speedup > 1.0:
        line = (
            f"decision: run {best.name}: {best.speedup:.3f}x AR measured on {n} held-out "
            f"prompts ({said})"
        )
        if rec is not None and rec.decision == "autoregressive":
            line += "; ewif's recommendation (below) expected no speed-up"
        elif rec is not None and rec.best_speculative != best.name:
            line += f"; ewif recommended {rec.best_speculative} (below)"
    else:
        line = (
            f"decision: decode autoregressively: none of our methods beat AR on {n} held-out "
            f"prompts; the fastest, {best.name}, measured {best.speedup:.3f}x ({said})"
        )
        if rec is not None and rec.decision == "speculative":
            line += f"; ewif had recommended {rec.best_speculative} (below)"
    return [line + partial]


def _ours(results: Results) -> list:
    """The methods ewif models (sd/csd) with a measured speed-up."""
    return [m for m in results.methods if m.kind in ("sd", "csd") and m.speedup is not None]


#: Fewer held-out prompts than this and the report warns that its intervals rest on too few.
MIN_PROMPTS = 8


def reliability(results: Results, meta: RunMetadata) -> list[str]:
    """A warning when the intervals rest on too few prompts: fewer than :data:`MIN_PROMPTS`
    held out, or the interval of the fastest method still holding 1 (AR)."""
    ours = _ours(results)
    if not ours:
        return []
    best = max(ours, key=lambda m: m.speedup)
    iv = meta.intervals.get(best.name)
    straddles = iv is not None and iv.low <= 1.0 <= iv.high
    if results.prompts >= MIN_PROMPTS and not straddles:
        return []
    measuring = f", {meta.measuring_prompts} measuring" if meta.measuring_prompts else ""
    what = (
        f"; {best.name}'s {100 * iv.level:.0f}% interval [{iv.low:.2f}, {iv.high:.2f}] "
        + ("holds 1 (AR): the decision is within the noise" if straddles else "")
        if iv is not None
        else ""
    )
    return [
        f"warning: the intervals rest on {results.prompts} held-out prompts{measuring}"
        f"{what.rstrip(' ')}; measure more prompts (--measure-prompts, --limit)"
    ]


_PEERS = {
    "hf-assisted": "transformers' assisted generation",
    "hf-prompt-lookup": "transformers' prompt lookup",
}


def peers(results: Results, meta: RunMetadata) -> list[str]:
    """A note for each peer method (transformers' own, which ewif does not model) that beat
    AR; whether the fastest peer beat our fastest method follows (:func:`peer_schedules`)."""
    return [
        f"note: {p.name} ({_PEERS[p.kind]}, which ewif does not model) measured "
        f"{p.speedup:.3f}x AR, faster than AR"
        for p in results.methods
        if p.kind in _PEERS and p.speedup is not None and p.speedup > 1.0
    ]


#: The glossary line the report ends with.
TERMS = (
    "terms: speedup = tokens/s over AR's in this run; predicted = ewif's EWIF for the "
    "measured acceptance and pass costs, on the generations the run made; |pred/meas-1| = "
    "the prediction's relative error ('-': no prediction); SWI = standardized walltime "
    "improvement, the run's counted passes priced by the measured cost curves; 'the cost "
    "model alone' = ewif with the run's own acceptance rates, so what error is left is the "
    "pass costs'; m=5 ×25 = 25 passes over 5 positions; (timed X) = the measuring phase's "
    "mean pass time at that m, in ms; accepted/step = tokens per target step, the bonus "
    "token included"
)


def terms(results: Results, meta: RunMetadata) -> list[str]:
    """The glossary line (:data:`TERMS`)."""
    return [TERMS]


#: The report's sections, in order (each ``(results, meta) -> lines``).
SECTIONS: tuple[Section, ...] = (
    decision,
    heading,
    method_table,
    reliability,
    peers,
    peer_schedules,
    acceptance_curves,
    ar_reference,
    row_costs,
    run_acceptance,
    target_passes,
    intervals,
    replays,
    timing_gap,
    coverage,
    wall_time,
    median_error,
    recommendation,
    tree_search,
    differing_outputs,
    categories,
    interrupted,
    terms,
)


def wall_time_lines(split: Mapping[str, WallSplit | Mapping[str, Any]]) -> list[str]:
    """Per method: where its wall time went (:mod:`realrun.books`; a stored mapping or a
    :class:`~ewif.files.run_metadata.WallSplit`), the residual flagged when above the
    threshold, and the mean against the median of its most frequent pass sizes."""
    rows = []
    for name, b in split.items():
        b = b if isinstance(b, WallSplit) else WallSplit.read(b)
        parts = (
            ", ".join(f"{k} {100 * v / b.wall_s:.1f}%" for k, v in b.shares.items())
            if b.wall_s
            else ""
        )
        flag = "  (residual above 3%: unexplained wall time)" if b.flagged else ""
        rows.append(f"{name}: wall {b.wall_s:.2f} s = {parts}{flag}")
        for model, by_m in b.passes.items():
            top = sorted(by_m.items(), key=lambda kv: -kv[1].count)[:3]
            rows.append(
                f"  {model} passes: "
                + ", ".join(
                    f"m={m} ×{v.count} mean {1000 * v.mean_s:.1f} ms (median "
                    f"{1000 * v.median_s:.1f}, p90 {1000 * v.p90_s:.1f})"
                    for m, v in top
                )
            )
    return rows
