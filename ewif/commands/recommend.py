"""``csd recommend``: the best cascade for a model set (preset or file), exactly.

Default search space: for a set of target + two neural drafters + a zero-cost statistical
drafter (MaG), the paper's space (``k11, k12, k22 ∈ 1..k_max``, MaG blocks fixed at 10)
at every lenience; otherwise (``--space full``) every upper-triangular K with entries in
``0..k_max`` over the candidate models (zero budgets drop drafters: all subsets).

When no configuration beats autoregressive decoding (best EWIF <= 1) the output says so
plainly (``"decision": "autoregressive"`` in ``--json``). With measured pass-cost curves
in the model set it also says which review sizes ``m`` the recommendation uses and what
they cost (:mod:`ewif.search.explain`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ewif import cli
from ewif.base import validate

HELP = "recommend the best cascade (models, K, lenience) for measured or preset alphas/costs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument(
        "--preset", help="embedded preset name (see 'csd presets'); default flan-t5-ms"
    )
    src.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="model-set file (csd.models/1-5, JSON or YAML; docs/files.md), e.g. written by "
        "csd measure, or a results file (csd.results/1: its run's model set)",
    )
    parser.add_argument(
        "--space",
        choices=("auto", "paper", "full"),
        default="auto",
        help="search space (default: paper when the set is target+2+MaG)",
    )
    parser.add_argument(
        "--k-max",
        type=int,
        default=None,
        help="largest budget searched (default 30 paper, 12 full)",
    )
    parser.add_argument(
        "--mag-block",
        type=int,
        default=10,
        help="Max-Gram's budgets in the paper space (refused in the full space)",
    )
    parser.add_argument(
        "--lenience",
        type=float,
        action="append",
        help="lenience to try (repeatable; default all in the set)",
    )
    parser.add_argument(
        "--fill",
        choices=("tokens", "rounds"),
        default="tokens",
        help="how a reviewing drafter fills its block: review calls until it holds at least "
        "its K entry in tokens, or exactly K entry review calls (rounds)",
    )
    parser.add_argument("--top", type=int, default=5, help="rows of the ranked table")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--plot", metavar="PATH", help="write STEM-landscape.SUF and STEM-decay.SUF (png/svg/pdf)"
    )
    parser.add_argument(
        "--batch-sizes",
        metavar="B,B,...",
        help="also give plain SD's best draft length at each batch size (ewif.predict.batch; "
        "0 = do not speculate), per drafter, and the schedule as ranges",
    )
    parser.add_argument(
        "--emit",
        choices=("vllm", "sglang", "trtllm", "llama.cpp", "transformers"),
        help="print a ready-to-run configuration of the best plain drafting this engine can "
        "express (engines run one drafter, not cascades), priced exactly, per --batch-sizes "
        "if given (ewif.serving)",
    )
    parser.add_argument(
        "--model-path",
        action="append",
        metavar="NAME=PATH",
        help="with --emit: the path or hub id of the set's model NAME (repeatable; default: "
        "the name)",
    )


def run(args: argparse.Namespace) -> int:
    from ewif.predict.batch import pricing_note
    from ewif.search.recommendation import load_model_set, recommend

    ms, where = load_model_set(args.preset, args.from_file)
    sizes, paths, plot_paths = _checked(args, ms)  # every argument before the search
    rec = recommend(
        ms,
        space=args.space,
        k_max=args.k_max,
        mag_block=args.mag_block,
        leniences=args.lenience,
        fill=args.fill,
        top=args.top,
        hint="lower --k-max or --mag-block, or pass fewer --lenience",
    )
    out = _report(rec, ms, where, args.space)
    k_max = rec.space[2]
    if sizes is not None:
        out["batch_schedule"] = _batch_schedule(ms, sizes, k_max)
        note = pricing_note(ms)
        if note and len(sizes) > 1:
            out["notes"].append(note)
    if args.emit:
        from ewif.serving.emit import emission

        out["emit"] = emission(ms, args.emit, sizes, k_max=k_max, paths=paths).to_dict()
    if plot_paths:
        out["plots"] = [str(p) for p in _plots(rec.result, rec.cascade(), plot_paths, k_max)]
    if args.json:
        print(json.dumps(out, indent=2))
    elif args.emit:
        print(_emit_human(out))
    else:
        print(_human(out))
    return cli.INTERRUPTED if rec.result.interrupted else 0


def _checked(args: argparse.Namespace, ms):
    """``(batch sizes or None, --model-path mapping, plot paths or None)``, every argument
    checked before the search starts."""
    from ewif.base import limits
    from ewif.search.space import is_paper_shape

    paper = args.space == "paper" or (args.space == "auto" and is_paper_shape(ms))
    if args.mag_block != 10 and not paper:
        raise ValueError(
            "--mag-block sets Max-Gram's budgets in the paper space; this set is searched in "
            "the full space (every K entry 0..--k-max): drop --mag-block, or give --space paper"
        )

    if args.top < 1:
        raise ValueError(f"--top must be an integer >= 1, got {args.top}")
    limits.at_most("--top", args.top, limits.MAX_TOP, "rows")
    if args.model_path and not args.emit:
        raise ValueError("--model-path maps model names for --emit; give --emit ENGINE too")
    sizes = None if args.batch_sizes is None else _batch_sizes(args.batch_sizes)
    paths = validate.name_values("--model-path", args.model_path or [], "NAME=PATH")
    return sizes, paths, _plot_paths(args.plot) if args.plot else None


def _report(rec, ms, where: str, space: str) -> dict:
    """The recommendation as ``--json`` prints it, the decision first (module docstring)."""
    from ewif.search.explain import decision_line, review_sizes
    from ewif.search.optimizer import best_sd

    result, (_, label, _) = rec.result, rec.space
    best, casc, sd = result.best, result.cascade(), best_sd(ms)
    interval = _interval(ms, best) if ms.bootstrap is not None else None
    choice, line = decision_line(
        best.ewif,
        f"{sd.models[1]}, k = {int(sd.K[0, 0])}",
        sd.ewif,
        best="the configuration below",
        interrupted=result.n_configurations if result.interrupted else None,
        unsettled=interval is not None and not interval["settled"],
    )
    passes, share = casc.passes_per_step(), casc.swi_breakdown()
    return {
        "decision_line": line,
        "choice": choice,
        "source": where,
        "title": ms.metadata.get("title"),
        "space": label,
        "method": result.method,
        "configurations": result.n_configurations,
        "seconds": result.seconds,
        "recommended": _cfg(best)
        | {"expected_tokens": casc.expected_tokens(), "expected_cost": casc.expected_cost()},
        "best_sd": _cfg(sd) | {"k": int(sd.K[0, 0])},
        "gain_over_sd": best.ewif / sd.ewif,
        "autoregressive": 1.0,
        "decision": rec.decision,
        "cost_model": "curve" if ms.cost_curve is not None else "affine",
        "review_sizes": review_sizes(casc),
        "where_the_time_goes": [
            {
                "model": m,
                "passes": float(passes[i]),
                "share": float(share[i]),
                "cost": float(share[i] * casc.expected_cost()),
            }
            for i, m in enumerate(best.models)
        ],
        "table": [_cfg(c) for c in result.table],
        "interrupted": result.interrupted,
        "notes": _space_notes(ms, space, best, sd, label),
        **({"interval": interval} if interval is not None else {}),
    }


def _space_notes(ms, space: str, best, sd, label: str) -> list[str]:
    """What the user should know about the searched space: a better plain SD outside it, and
    the paper space used on a set whose last model is not a free Max-Gram."""
    from ewif.search.space import is_paper_shape

    notes = []
    if sd.ewif > best.ewif:
        k = int(sd.K[0, 0])
        notes.append(
            f"plain SD with {sd.models[1]}, k = {k} (EWIF {sd.ewif:.4f}) beats every "
            f"configuration of the searched space ({label}); use --space full --k-max {k} "
            "to search it too"
        )
    if space == "paper" and not is_paper_shape(ms):
        last = ms.models[-1]
        notes.append(
            f"the paper space fixes the last drafter's block, meant for a free Max-Gram; this "
            f"set's last model {last!r} costs {float(ms.cost[-1]):.4g} per pass: prefer "
            "--space full"
        )
    return notes


#: Largest batch size --batch-sizes accepts (the exact law convolves B rows).
MAX_BATCH = 1024


def _batch_schedule(ms, sizes: list[int], k_max: int) -> dict:
    """Per drafter: the best plain-SD draft length at every asked batch size and the ranges."""
    from ewif.predict.batch import best_draft_lengths, schedule

    out = {}
    for drafter in ms.models[1:]:
        choices = best_draft_lengths(ms, drafter, sizes, k_max=k_max)
        out[drafter] = {
            "by_batch": [{"batch": c.batch, "k": c.k, "ratio": c.ratio} for c in choices],
            "ranges": [{"low": r.low, "high": r.high, "k": r.k} for r in schedule(choices)],
        }
    return out


def _batch_sizes(spec: str) -> list[int]:
    """``--batch-sizes``: comma-separated batch sizes in ``1..MAX_BATCH``."""
    sizes = validate.comma_separated("--batch-sizes", spec, int, "batch sizes (e.g. 1,2,4,8)")
    bad = [b for b in sizes if not 1 <= b <= MAX_BATCH]
    if bad:
        raise ValueError(f"--batch-sizes must lie in 1..{MAX_BATCH}, got {bad[0]}")
    return sizes


def _interval(ms, best) -> dict:
    """The bootstrap interval of the best configuration's EWIF (:mod:`ewif.predict.bootstrap`) and
    whether it settles the decision against AR (EWIF 1)."""
    from ewif.predict.bootstrap import prediction_interval

    iv = prediction_interval(ms, best.models, best.K, best.lenience)
    return {
        "level": iv.level,
        "low": iv.low,
        "high": iv.high,
        "prompts": ms.bootstrap.prompts,
        "settled": not iv.contains(1.0),
    }


def _cfg(c) -> dict:
    return {"models": list(c.models), "K": c.K.tolist(), "lenience": c.lenience, "ewif": c.ewif}


def _plot_paths(path: str) -> tuple[Path, Path]:
    from ewif.plotting import style

    p = style.output_path(path)
    return (
        style.output_path(p.with_name(f"{p.stem}-landscape{p.suffix}")),
        style.output_path(p.with_name(f"{p.stem}-decay{p.suffix}")),
    )


def _plots(result, casc, paths, k_max) -> list[Path]:
    from ewif.plotting.decay import compute_decay, draw_decay
    from ewif.plotting.landscape import draw_landscape
    from ewif.search.landscape import landscape_around

    return [
        draw_landscape(landscape_around(result, k_max=min(k_max, 30)), paths[0]),
        draw_decay(
            compute_decay(casc, max_position=25),
            paths[1],
            title="Acceptance by draft position (target review)",
        ),
    ]


def _emit_human(out: dict) -> str:
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


def _human(out: dict) -> str:
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
