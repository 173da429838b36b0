"""The human text of ``csd recommend``: the report (:func:`report_text`: the decision first,
then the evidence) and the ``--emit`` report (:func:`emit_text`), both from the ``--json``
dictionary, so the two outputs never disagree."""

from __future__ import annotations

import json


def emit_text(out: dict) -> str:
    """The ``--emit`` report: what is emitted, its exact EWIF next to the cascade's, the
    throughput by batch size, the ready-to-run configuration and the notes."""
    from ewif.base.text_table import table

    em, rec = out["emit"], out["recommended"]
    what = (
        "no speculation (serve the target alone)"
        if em["method"] == "none"
        else f"{em['method']} {em['drafter']}, k = {em['k']} at batch 1"
    )
    lines = [
        f"csd recommend --emit {em['engine']} — {out['source']}"
        + (f": {out['title']}" if out["title"] else ""),
        "",
        f"emitted for {em['engine_name']}: {what}",
        f"EWIF at batch 1     : emitted {em['ewif']:.4f}; best cascade "
        f"{' > '.join(rec['models'])} {rec['ewif']:.4f} ({rec['ewif'] / em['ewif']:.4f}x the "
        "emitted; cascades are priced at batch 1 only)",
    ]
    if em["by_batch"]:
        lines += [
            "",
            "by batch size (exact, ewif.predict.batch; k = 0: autoregressive):",
            table(
                ["batch", "k", "throughput vs AR at that batch"],
                [[c["batch"], c["k"], f"{c['ratio']:.4f}"] for c in em["by_batch"]],
            ),
        ]
    lines += [
        "",
        "ready to run (option names from " + "; ".join(em["sources"]) + "):",
        em["text"],
    ]
    no = em.get("declined")
    if no:
        lines += [
            "",
            f"not emitted — the best speculation, {no['method']} {no['drafter']} k = {no['k']}, "
            f"at {no['ewif']:.4f}x autoregressive decoding (to try it, or to check the 'no'):",
            no["text"],
        ]
    lines += ["", "notes:", *[f"- {n}" for n in em["notes"]]]
    return "\n".join(lines)


def report_text(out: dict) -> str:
    """The report: the decision, then the evidence (the configuration, plain SD, AR, the
    interval), review sizes, where the time goes, the ranked table, the batch schedule, the
    files written, and a line of terms."""
    sections = (_head, _choice, _review, _time, _ranked, _batch, _tail)
    return "\n".join(line for section in sections for line in section(out))


def _head(out: dict) -> list[str]:
    """The decision, the source, what was searched and the notes on the space."""
    done = "searched" if not out["interrupted"] else "interrupted after"
    return [
        out["decision_line"],
        f"csd recommend — {out['source']}" + (f": {out['title']}" if out["title"] else ""),
        f"{done} {out['configurations']:,} configurations ({out['space']}; "
        f"{out['method']}) in {out['seconds']:.2f} s",
        "",
        *[f"note: {n}" for n in out["notes"]],
        *([""] if out["notes"] else []),
    ]


def _choice(out: dict) -> list[str]:
    """The best configuration of the space (called recommended only when it is the
    decision), plain SD, AR, and the interval when the set carries per-prompt evidence."""
    rec, sd, gain = out["recommended"], out["best_sd"], out["gain_over_sd"]
    head = "recommended cascade" if out["choice"] == "cascade" else "best in the space"
    lenience = f"lenience {rec['lenience']:g}" if any(any(r) for r in rec["K"][1:]) else ""
    lines = [
        f"{head:<19} : {' > '.join(rec['models'])}   {lenience}".rstrip(),
        f"  K                 : {rec['K']}",
        f"  EWIF              : {rec['ewif']:.4f}   ({rec['expected_tokens']:.3f} tokens per "
        f"target step, cost {rec['expected_cost']:.4f} target passes)",
        f"best plain SD       : {sd['models'][1]}, k = {sd['k']}: EWIF {sd['ewif']:.4f}",
        f"gain over plain SD  : x{gain:.4f} ({(gain - 1) * 100:+.1f}%)",
        "autoregressive      : EWIF 1.0000",
    ]
    iv = out.get("interval")
    if iv:
        lines.append(
            f"{100 * iv['level']:.0f}% interval        : [{iv['low']:.4f}, {iv['high']:.4f}]; "
            f"margin over AR {100 * (rec['ewif'] - 1):+.1f}% [{100 * (iv['low'] - 1):+.1f}%, "
            f"{100 * (iv['high'] - 1):+.1f}%] (bootstrap over {iv['prompts']} measuring prompts)"
        )
        if not iv["settled"]:
            lines.append(
                "warning: the best speculative configuration is within the noise of AR: "
                "measure more prompts"
            )
    return [*lines, ""]


def _review(out: dict) -> list[str]:
    """Which review sizes ``m`` the configuration uses, with measured pass-cost curves."""
    from ewif.search.explain import review_lines

    if out["cost_model"] != "curve":
        return []
    return [
        "review sizes (measured pass-cost curves; m = positions per pass):",
        *review_lines(out["review_sizes"]),
        "",
    ]


def _time(out: dict) -> list[str]:
    """Passes, cost and share of each model per target step."""
    from ewif.base.text_table import table

    rows = [
        [w["model"], w["passes"], w["cost"], f"{w['share'] * 100:.1f}%"]
        for w in out["where_the_time_goes"]
    ]
    return [
        "where the time goes (per target step):",
        table(["model", "passes", "cost", "share"], rows),
        "",
    ]


def _ranked(out: dict) -> list[str]:
    """The ranked configurations of the space."""
    from ewif.base.text_table import table

    rows = [
        [i + 1, c["ewif"], f"{c['lenience']:g}", json.dumps(c["K"]), " > ".join(c["models"])]
        for i, c in enumerate(out["table"])
    ]
    return [
        "ranked configurations:",
        table(["rank", "EWIF", "lenience", "K", "models"], rows),
    ]


def _batch(out: dict) -> list[str]:
    """Plain SD's best draft length by batch size, per drafter, as ranges."""
    lines = []
    for drafter, sched in out.get("batch_schedule", {}).items():
        parts = [
            f"B={r['low']}"
            + (f"..{r['high']}" if r["high"] > r["low"] else "")
            + (f": k={r['k']}" if r["k"] else ": AR")
            for r in sched["ranges"]
        ]
        ratios = ", ".join(f"B={c['batch']} {c['ratio']:.3f}x" for c in sched["by_batch"])
        lines += [
            "",
            f"batch-aware plain SD with {drafter}: " + "; ".join(parts),
            f"  throughput vs AR at the same batch: {ratios}",
        ]
    return lines


def _tail(out: dict) -> list[str]:
    """The figures written, the interruption, and the terms the report uses."""
    lines = ["", "plots: " + ", ".join(out["plots"])] if out.get("plots") else []
    if out["interrupted"]:
        lines += ["", "(interrupted: partial search)"]
    return [*lines, "", TERMS]


#: The glossary line of the report.
TERMS = (
    "terms: EWIF = expected walltime improvement factor, the exact speed-up over "
    "autoregressive decoding (AR = 1); K[r][j] = tokens of model j+1 drafted per review by "
    "model r (row 0: the target); lenience = how far a drafter's review loosens acceptance "
    "(the target's review is exact); passes and cost per target step, in target passes"
)
