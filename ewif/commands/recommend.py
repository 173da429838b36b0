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
        help="csd.models/1-6 model-set file (JSON or YAML), e.g. written by realrun",
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
    parser.add_argument("--mag-block", type=int, default=10, help="MaG budget in the paper space")
    parser.add_argument(
        "--lenience",
        type=float,
        action="append",
        help="lenience to try (repeatable; default all in the set)",
    )
    parser.add_argument("--fill", choices=("tokens", "rounds"), default="tokens")
    parser.add_argument("--top", type=int, default=5, help="rows of the ranked table")
    parser.add_argument(
        "--mix",
        metavar="NAME=W,...",
        help="the best configuration for a workload of these categories (shares of the "
        "generated tokens, e.g. writing=0.5,code=0.3,rag=0.2), priced by Theorem MX from the "
        "set's alpha per category (csd.models/6)",
    )
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
    parser.add_argument(
        "--vllm-profile",
        metavar="FILE",
        help="with --emit vllm: price with vLLM's own measured step costs and n-gram behaviour "
        "(a csd.vllm-profile/1 file, benchmarks/vllm_profile.py)",
    )
    trees = parser.add_argument_group("token trees (ewif.search.tree_search)")
    trees.add_argument(
        "--tree",
        action="store_true",
        help="search token trees too (a tree the target reviews, siblings on a cascade's draft, "
        "a tree at the bottom) and say whether a tree, a chain or AR wins; budgets 0..--k-max "
        "(default 8)",
    )
    trees.add_argument("--tree-nodes", type=int, default=32, help="largest tree, root included")
    trees.add_argument("--tree-depth", type=int, default=8, help="deepest tree below the root")
    trees.add_argument("--siblings", type=int, default=7, help="most siblings per draft token")


def run(args: argparse.Namespace) -> int:
    from ewif.base import limits
    from ewif.search.explain import review_sizes
    from ewif.search.optimizer import best_sd
    from ewif.search.recommendation import load_model_set, recommend

    ms, where = load_model_set(args.preset, args.from_file)
    if args.mix:
        if args.tree:
            raise ValueError("--mix does not combine with --tree")
        return _run_mix(args, ms, where)
    if args.top < 1:
        raise ValueError(f"--top must be an integer >= 1, got {args.top}")
    limits.at_most("--top", args.top, limits.MAX_TOP, "rows")
    if args.tree:
        return _tree(args, ms, where)
    plot_paths = _plot_paths(args.plot) if args.plot else None
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
    result, (_, label, k_max) = rec.result, rec.space
    best = result.best
    casc = result.cascade()
    sd = best_sd(ms)
    passes, share = casc.passes_per_step(), casc.swi_breakdown()
    where_time = [
        {
            "model": m,
            "passes": float(passes[i]),
            "cost": float(share[i] * casc.expected_cost()),
            "share": float(share[i]),
        }
        for i, m in enumerate(best.models)
    ]
    out = {
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
        "where_the_time_goes": where_time,
        "table": [_cfg(c) for c in result.table],
        "interrupted": result.interrupted,
        "notes": _space_notes(ms, args.space, best, sd, label),
    }
    if ms.bootstrap is not None:
        out["interval"] = _interval(ms, best)
    if args.batch_sizes:
        out["batch_schedule"] = _batch_schedule(ms, args.batch_sizes, k_max)
    if args.vllm_profile and args.emit != "vllm":
        raise ValueError("--vllm-profile prices vLLM's drafting; give --emit vllm too")
    if args.model_path and not args.emit:
        raise ValueError("--model-path maps model names for --emit; give --emit ENGINE too")
    if args.emit:
        from ewif.serving.emit import emission

        sizes = _batch_sizes(args.batch_sizes) if args.batch_sizes else None
        paths = validate.name_values("--model-path", args.model_path or [], "NAME=PATH")
        profile = None
        if args.vllm_profile:
            from ewif.files.vllm_profile import load as load_profile

            profile = load_profile(args.vllm_profile)
        emitted = emission(ms, args.emit, sizes, k_max=k_max, paths=paths, profile=profile)
        out["emit"] = emitted.to_dict()
    if plot_paths:
        out["plots"] = [str(p) for p in _plots(result, casc, ms, plot_paths, k_max)]
    if args.json:
        print(json.dumps(out, indent=2))
    elif args.emit:
        print(_emit_human(out))
    else:
        print(_human(out, best, sd))
    return cli.INTERRUPTED if result.interrupted else 0


def _tree(args: argparse.Namespace, ms, where: str) -> int:
    """``--tree``: the exact tree search and its report (:mod:`ewif.search.tree_explain`)."""
    from ewif.search.tree_explain import search_lines, search_report
    from ewif.search.tree_search import TreeBounds, optimize_trees

    for option in ("plot", "batch_sizes", "emit"):
        if getattr(args, option):
            raise ValueError(f"--tree does not combine with --{option.replace('_', '-')}")
    bounds = TreeBounds(
        k_max=8 if args.k_max is None else validate.count("--k-max", args.k_max, minimum=1),
        nodes=validate.count("--tree-nodes", args.tree_nodes, minimum=1),
        depth=validate.count("--tree-depth", args.tree_depth),
        siblings=validate.count("--siblings", args.siblings),
    )
    result = optimize_trees(
        ms, bounds=bounds, leniences=args.lenience, fill=args.fill, top=args.top
    )
    out = search_report(result, where)
    print(json.dumps(out, indent=2) if args.json else search_lines(out))
    return 0


def _run_mix(args: argparse.Namespace, ms, where: str) -> int:
    """``--mix``: the certified best configuration on the mix (:mod:`ewif.search.mix`), α per
    category and the interval resampling prompts within categories (:mod:`ewif.predict.mix`)."""
    from ewif.files.categories import parse_mix
    from ewif.predict.mix import mix_intervals
    from ewif.search.mix import alpha_by_category_table, recommend_mix

    mix = parse_mix(args.mix).checked(ms.categories)
    rec = recommend_mix(
        ms,
        mix,
        space=args.space,
        k_max=args.k_max,
        mag_block=args.mag_block,
        leniences=args.lenience,
        fill=args.fill,
    )
    out = {"source": where, **rec.to_dict()}
    if all(ms.categories[n].n_prompts >= 2 for n in mix.used):
        best = rec.best
        (iv,) = mix_intervals(ms, mix, [(best.models, best.K, best.lenience)], fill=args.fill)
        out["interval"] = {"level": iv.level, "low": iv.low, "high": iv.high}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    lines = [f"csd recommend --mix — {where}", *rec.lines()]
    if "interval" in out:
        iv = out["interval"]
        lines.append(
            f"  {100 * iv['level']:.0f}% interval: [{iv['low']:.4f}, {iv['high']:.4f}] "
            "(bootstrap over the measuring prompts, within categories)"
        )
    print("\n".join([*lines, "", alpha_by_category_table(ms, mix.weights)]))
    return 0


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


def _batch_schedule(ms, spec: str, k_max: int) -> dict:
    """Per drafter: the best plain-SD draft length at every asked batch size and the ranges."""
    from ewif.predict.batch import best_draft_lengths, schedule

    sizes = _batch_sizes(spec)
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


def _plots(result, casc, ms, paths, k_max) -> list[Path]:
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


def _human(out: dict, best, sd) -> str:
    from ewif.base.text_table import table
    from ewif.search.explain import autoregressive_line, review_lines

    rec = out["recommended"]
    lines = [
        f"csd recommend — {out['source']}" + (f": {out['title']}" if out["title"] else ""),
        f"searched {out['configurations']:,} configurations ({out['space']}; "
        f"{out['method']}) in {out['seconds']:.2f} s",
        "",
    ]
    lines += [f"note: {n}" for n in out["notes"]] + ([""] if out["notes"] else [])
    if out["decision"] == "autoregressive":
        what = f"{' > '.join(best.models)} K={best.K.tolist()} lenience {best.lenience:g}"
        lines += [autoregressive_line(what, best.ewif), ""]
    lines += [
        f"recommended cascade : {' > '.join(best.models)}   lenience {best.lenience:g}",
        f"  K                 : {best.K.tolist()}",
        f"  EWIF              : {best.ewif:.4f}   ({rec['expected_tokens']:.3f} tokens per "
        f"target step, cost {rec['expected_cost']:.4f} target passes)",
        f"best plain SD       : {sd.models[1]}, k = {int(sd.K[0, 0])}: EWIF {sd.ewif:.4f}",
        f"gain over plain SD  : x{out['gain_over_sd']:.4f} "
        f"({(out['gain_over_sd'] - 1) * 100:+.1f}%)",
        "autoregressive      : EWIF 1.0000",
        "",
    ]
    iv = out.get("interval")
    if iv:
        lines[-1:-1] = [
            f"{100 * iv['level']:.0f}% interval        : [{iv['low']:.4f}, {iv['high']:.4f}]; "
            f"margin over AR {100 * (best.ewif - 1):+.1f}% [{100 * (iv['low'] - 1):+.1f}%, "
            f"{100 * (iv['high'] - 1):+.1f}%] (bootstrap over {iv['prompts']} measuring prompts)"
        ]
        if not iv["settled"]:
            lines[-1:-1] = [
                "the best speculative configuration is within the noise of AR: measure more prompts"
            ]
    if out["cost_model"] == "curve":
        lines += [
            "review sizes (measured pass-cost curves; m = positions per pass):",
            *review_lines(out["review_sizes"]),
            "",
        ]
    lines += [
        "where the time goes (per target step):",
        table(
            ["model", "passes", "cost", "share"],
            [
                [w["model"], w["passes"], w["cost"], f"{w['share'] * 100:.1f}%"]
                for w in out["where_the_time_goes"]
            ],
        ),
        "",
        "ranked configurations:",
        table(
            ["rank", "EWIF", "lenience", "K", "models"],
            [
                [
                    i + 1,
                    c["ewif"],
                    f"{c['lenience']:g}",
                    json.dumps(c["K"]),
                    " > ".join(c["models"]),
                ]
                for i, c in enumerate(out["table"])
            ],
        ),
    ]
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
    if out.get("plots"):
        lines += ["", "plots: " + ", ".join(out["plots"])]
    if out["interrupted"]:
        lines += ["", "(interrupted: partial search)"]
    return "\n".join(lines)
