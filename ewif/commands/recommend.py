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
from ewif.commands import recommend_text

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
        help="model-set file (csd.models/1-6, JSON or YAML; docs/files.md), e.g. written by "
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
    cli.add_fill_argument(parser)
    parser.add_argument("--top", type=int, default=5, help="rows of the ranked table")
    parser.add_argument(
        "--mix",
        metavar="NAME=W,...",
        help="the best configuration for a workload of these categories (shares of the "
        "generated tokens, e.g. writing=0.5,code=0.3,rag=0.2), priced by Theorem MX from the "
        "set's alpha per category (csd.models/6)",
    )
    parser.add_argument(
        "--decision",
        choices=("assured", "mean"),
        default="assured",
        help="when to speculate rather than decode autoregressively: assured (default) only "
        "when the configuration's 90 %% interval lies above 1, mean when its EWIF exceeds 1 "
        "(ewif.predict.assurance; a set without per-prompt evidence: both the mean)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--plot", metavar="PATH", help="write STEM-landscape.SUF and STEM-decay.SUF (png/svg/pdf)"
    )
    _serving_arguments(parser)
    _tree_arguments(parser.add_argument_group("token trees (ewif.search.tree_search)"))


def _serving_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of serving: batch sizes and a ready-to-run engine configuration."""
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


def _tree_arguments(trees: argparse._ArgumentGroup) -> None:
    """The options of ``--tree``."""
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
    from ewif.predict.batch import pricing_note
    from ewif.search.recommendation import load_model_set, recommend

    ms, where = load_model_set(args.preset, args.from_file)
    if args.mix:
        if args.tree:
            raise ValueError("--mix does not combine with --tree")
        return _run_mix(args, ms, where)
    sizes, paths, plot_paths = _checked(args, ms)  # every argument before the search
    if args.tree:
        return _tree(args, ms, where)
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
    out = _report(rec, ms, where, args.space, args.decision)
    k_max = rec.space[2]
    if sizes is not None:
        out["batch_schedule"] = _batch_schedule(ms, sizes, k_max)
        note = pricing_note(ms)
        if note and len(sizes) > 1:
            out["notes"].append(note)
    if args.emit:
        from ewif.serving.emit import emission

        profile = None
        if args.vllm_profile:
            from ewif.files.vllm_profile import load as load_profile

            profile = load_profile(args.vllm_profile)
        emitted = emission(ms, args.emit, sizes, k_max=k_max, paths=paths, profile=profile)
        out["emit"] = emitted.to_dict()
    if plot_paths:
        out["plots"] = [str(p) for p in _plots(rec.result, rec.cascade(), plot_paths, k_max)]
    if args.json:
        print(json.dumps(out, indent=2))
    elif args.emit:
        print(recommend_text.emit_text(out))
    else:
        print(recommend_text.report_text(out))
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
    if args.vllm_profile and args.emit != "vllm":
        raise ValueError("--vllm-profile prices vLLM's drafting; give --emit vllm too")
    sizes = None if args.batch_sizes is None else _batch_sizes(args.batch_sizes)
    paths = validate.name_values("--model-path", args.model_path or [], "NAME=PATH")
    return sizes, paths, _plot_paths(args.plot) if args.plot else None


def _report(rec, ms, where: str, space: str, rule: str = "assured") -> dict:
    """The recommendation as ``--json`` prints it, the decision first (module docstring), under
    the decision ``rule`` (:mod:`ewif.predict.assurance`)."""
    from ewif.predict.assurance import decide
    from ewif.predict.bootstrap import prediction_interval
    from ewif.search.explain import decision_line, review_sizes
    from ewif.search.optimizer import best_sd

    result, (_, label, _) = rec.result, rec.space
    best, casc, sd = result.best, result.cascade(), best_sd(ms)
    iv = None
    if ms.bootstrap is not None:
        iv = prediction_interval(ms, best.models, best.K, best.lenience)
    top = sd if sd.ewif > best.ewif else best
    decided = decide(
        ms, top.models, top.K, top.lenience, top.ewif, rule, interval=iv if top is best else None
    )
    interval = None if iv is None else _interval(iv, ms.bootstrap.prompts)
    choice, line = decision_line(
        best.ewif,
        f"{sd.models[1]}, k = {int(sd.K[0, 0])}",
        sd.ewif,
        best="the configuration below",
        interrupted=result.n_configurations if result.interrupted else None,
        unsettled=interval is not None and not interval["settled"],
        unassured=decided.reason() if decided.unassured else None,
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
        "decision": decided.decision,
        "decision_rule": rule,
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


def _interval(iv, prompts: int) -> dict:
    """The bootstrap interval ``iv`` of the best configuration's EWIF
    (:mod:`ewif.predict.bootstrap`, over ``prompts`` measuring prompts) and whether it settles
    the decision against AR (EWIF 1)."""
    return {
        "level": iv.level,
        "low": iv.low,
        "high": iv.high,
        "prompts": prompts,
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
