"""``csd simulate``: Monte Carlo of a cascade, z-scored against its exact theory.

The configuration comes from a model-set file (``FILE``; a results file gives its run's model
set) or a preset (``--preset``); the cascade follows the one rule of
:func:`ewif.search.recommendation.choose_cascade` (``csd plot`` follows it too): ``--K`` (with
``--models``) given on the command line, else the set's ``cascade`` section, else the
configuration ``csd recommend`` recommends with its default search space; ``--models``
without ``--K`` is refused. Exit status 0 when every
quantity agrees with the exact theory (Bonferroni at ``--level``), 1 when some test
rejects, 2 for bad input. The Bernoulli engine prices passes as the paper counts them, so a
set whose drafters pay the catch-up pass (every measured set) is compared with the exact
theory without it, and the output gives the EWIF with it too (its witness is
:mod:`simulate.fed_positions`, tested in ``tests/ewif/test_catch_up.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ewif import cli

HELP = "simulate a cascade (Monte Carlo of Algorithm 1) and compare it with the exact EWIF"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="model-set file (csd.models/1-6, JSON or YAML), or a results file (csd.results/1: "
        "the model set its run used)",
    )
    src.add_argument("--preset", help="embedded preset (see 'csd presets'); default flan-t5-ms")
    parser.add_argument(
        "--models", help="model names separated by commas, target first (needs --K)"
    )
    parser.add_argument("--K", dest="K", help='budget matrix as JSON, e.g. "[[2,10],[0,10]]"')
    parser.add_argument("--lenience", type=float, help="lenience of the drafter reviews")
    cli.add_fill_argument(parser)
    parser.add_argument(
        "--trials",
        type=int,
        default=None,
        help="target steps to simulate (default 200000; 20000 with --tree)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (reproducible runs)")
    parser.add_argument("--level", type=float, default=0.999, help="confidence level")
    parser.add_argument(
        "--positions",
        type=int,
        default=None,
        help="draft positions compared (default: while P >= 0.001)",
    )
    parser.add_argument(
        "--rho",
        type=float,
        action="append",
        help="also simulate bursty (Markov) acceptance with this lag-one "
        "correlation and report the i.i.d. error (repeatable)",
    )
    parser.add_argument(
        "--replay",
        action="store_true",
        help="also replay the cascade over the file's measured acceptance traces "
        "(simulate.trace_replay) and report its speed-up next to the exact EWIF of the same "
        "generation lengths",
    )
    parser.add_argument(
        "--tree",
        action="store_true",
        help="simulate the file's 'tree' section (a token-tree configuration, csd.models/6) on "
        "explicit token lists (simulate.tree_witness, about 10^4 steps/s) against its exact law",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--plot",
        metavar="PATH",
        help="write simulated vs exact acceptance-by-position and "
        "tokens-per-step histogram (png/svg/pdf)",
    )


def _cascade(args: argparse.Namespace, ms: Any) -> tuple[Any, str, float]:
    """The cascade to simulate by the one rule (:func:`ewif.search.recommendation.choose_cascade`):
    ``--K`` (with ``--models``), else the set's ``cascade`` section, else the recommendation."""
    from ewif.base import validate
    from ewif.search.recommendation import choose_cascade

    chosen = choose_cascade(
        ms,
        None if args.models is None else validate.names("--models", args.models),
        None if args.K is None else validate.json_matrix("--K", args.K),
        args.lenience,
        fill=args.fill,
        hint="give the cascade with --models and --K (or a 'cascade' section)",
    )
    return chosen.cascade, chosen.how, chosen.lenience


def run(args: argparse.Namespace) -> int:
    from ewif.base import limits, validate
    from ewif.search.recommendation import load_model_set
    from simulate.bernoulli import simulate
    from simulate.compare import compare_with_exact, default_max_position

    if args.trials is None:
        args.trials = 20_000 if args.tree else 200_000
    validate.count("--seed", args.seed)
    trials = validate.count("--trials", args.trials, minimum=2)
    limits.at_most("--trials", trials, limits.MAX_TRIALS, "target steps (minutes at worst)")
    level = validate.probability("--level", args.level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"--level must be strictly between 0 and 1, got {args.level!r}")
    if args.positions is not None:
        validate.count("--positions", args.positions, minimum=1)
        limits.at_most("--positions", args.positions, limits.MAX_POSITIONS, "draft positions")
    if args.tree:
        return _tree(args, trials, level)
    if args.plot:
        from ewif.plotting import style

        style.output_path(args.plot)
    ms, where = load_model_set(args.preset, args.file)
    priced, how, lenience = _cascade(args, ms)
    cascade = _without_catch_up(priced)
    progress = sys.stderr.isatty() and not args.json
    result = simulate(cascade, trials, args.seed, progress=progress)
    m = args.positions or default_max_position(cascade)
    comparison = compare_with_exact(cascade, max_position=m, result=result, level=level)
    out = {
        "source": where,
        "cascade": {
            "models": list(cascade.names or ()),
            "K": cascade.K.tolist(),
            "lenience": lenience,
            "fill": cascade.fill,
            "chosen": how,
        },
        "catch_up": _catch_up_note(priced),
        "steps_per_second": result.steps_per_second,
        "simulation": result.to_dict(level, m),
        "comparison": comparison.to_dict(level),
    }
    if args.rho:
        from simulate.correlated import correlation_report

        streams = max(2, min(2_000, trials // 50))  # the same number of steps per rho
        rows = correlation_report(
            cascade, args.rho, streams, max(1, trials // streams), seed=args.seed, level=level
        )
        out["bursty"] = [r.to_dict() for r in rows]
    if args.replay:
        out["replay"] = _replay(ms, priced, lenience, args.seed)
    if args.plot:
        from ewif.plotting.simulation import draw_simulation
        from simulate.plotting import simulation_data

        data = simulation_data(result, cascade, max_position=m, level=level)
        out["plot"] = str(draw_simulation(data, args.plot))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(_human(out, comparison, level))
    if result.interrupted:
        return cli.INTERRUPTED  # Ctrl-C: the partial comparison was printed
    return 0 if comparison.agrees(level) else 1


def _tree(args: argparse.Namespace, trials: int, level: float) -> int:
    """``--tree``: the witness of the file's tree configuration against its exact law."""
    from ewif.files.tree_models import load_tree, tree_cascade
    from simulate.tree_compare import compare_tree

    if args.file is None:
        raise ValueError("--tree needs a model-set FILE with a 'tree' section")
    for option in ("models", "K", "lenience", "rho", "plot"):
        if getattr(args, option):
            raise ValueError(f"--tree takes its configuration from the file; drop --{option}")
    ms, config = load_tree(args.file)
    if config is None:
        raise ValueError(f"{args.file}: no 'tree' section to simulate (models, K, review, ...)")
    comparison = compare_tree(tree_cascade(ms, config, fill=args.fill), trials, args.seed)
    out = {"configuration": config.to_dict(), "fill": args.fill, "seed": args.seed}
    out |= comparison.to_dict(level)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(_tree_human(config.describe(), out, level))
    return 0 if out["agrees"] else 1


def _tree_human(what: str, out: dict, level: float) -> str:
    from ewif.base.text_table import table
    from simulate.stats import normal_quantile

    z = normal_quantile(level)
    lines = [
        f"{what}  fill={out['fill']}",
        f"{out['streams']} streams x {out['steps']} counted steps on explicit token lists "
        f"(simulate.tree_witness), seed {out['seed']}, {out['seconds']:.2f} s; {level:.1%} "
        "intervals",
        "",
        table(
            ["quantity", "simulated", f"± {level:.1%}", "exact", "z"],
            [
                [r["quantity"], f"{r['simulated']:.5f}", f"± {z * r['se']:.5f}",
                 f"{r['exact']:.5f}", f"{r['z']:+.2f}"]
                for r in out["rows"]
            ],
        ),
    ]  # fmt: skip
    verdict = "agrees with" if out["agrees"] else "DISAGREES with"
    lines.append(f"verdict: simulation {verdict} the exact theory (Bonferroni, {level:.1%})")
    return "\n".join(lines)


def _without_catch_up(cascade: Any) -> Any:
    """The cascade priced as the paper counts passes: what the Bernoulli engine simulates
    (the catch-up pass has its own witness, :mod:`simulate.fed_positions`)."""
    if not any(cascade.catch_up):
        return cascade
    return cascade.with_catch_up([False] * (cascade.n + 1))


def _catch_up_note(priced: Any) -> dict | None:
    """What the set's catch-up flags change, when it has any (module docstring)."""
    if not any(priced.catch_up):
        return None
    return {
        "flags": [bool(f) for f in priced.catch_up],
        "ewif_with_catch_up": priced.ewif(),
        "simulated_as": "the paper's pass accounting (m = 1 per generating pass)",
    }


def _replay(ms: Any, cascade: Any, lenience: float, seed: int) -> dict:
    """The trace replay's speed-up and 90 % interval (expected speed-up, over the measuring
    prompts), next to the exact EWIF of generations of the traces' lengths (Theorem FL)."""
    import numpy as np

    from simulate.trace_replay import replay

    found = replay(
        ms,
        list(cascade.names),
        cascade.K,
        lenience,
        catch_up=cascade.catch_up,
        repeats=10,
        seed=seed,
    )
    low, high = found.interval(seed=seed)
    lengths = [int(n) for n in found.tokens]
    return {
        "speedup": found.speedup,
        "low": low,
        "high": high,
        "prompts": len(lengths),
        "ewif_same_lengths": cascade.ewif(lengths),
        "mean_length": float(np.mean(lengths)),
    }


def _human(out: dict, comparison: Any, level: float) -> str:
    from ewif.base.text_table import table
    from ewif.search.explain import lenience_words
    from simulate.stats import normal_quantile

    c, r = out["cascade"], comparison.result
    lines = [
        f"{out['source']}: {' > '.join(c['models'])}  K={c['K']}  "
        f"{lenience_words(c['K'], c['lenience']) or 'lenience 1'}  "
        f"fill={c['fill']}  ({c['chosen']})",
        f"{r.trials:,} target steps, seed {r.seed}, {r.seconds:.2f} s "
        f"({r.steps_per_second:,.0f} steps/s){'  INTERRUPTED' if r.interrupted else ''}; "
        f"{level:.1%} intervals (EWIF: delta method)",
        "",
    ]
    z = normal_quantile(level)
    rows = [
        [
            row.quantity,
            f"{row.simulated:.5f}",
            f"± {z * row.se:.5f}",
            f"{row.exact:.5f}",
            f"{row.z:+.2f}",
        ]
        for row in comparison.rows
    ]
    lines.append(table(["quantity", "simulated", f"± {level:.1%}", "exact", "z"], rows))
    if out.get("catch_up"):
        lines.append(
            "the set's drafters pay the catch-up pass (exact EWIF with it "
            f"{out['catch_up']['ewif_with_catch_up']:.5f}); the Monte Carlo prices passes as "
            "the paper counts them and is compared with the exact theory without it"
        )
    chi = comparison.chi_square
    lines.append(
        f"tokens per step vs tokens_pgf(): chi-square {chi.statistic:.2f} on {chi.dof} dof, "
        f"p = {chi.p_value:.3g}"
    )
    for b in out.get("bursty", []):
        s = b["ewif_simulated"]
        lines.append(
            f"bursty rho={b['rho']:g}: simulated EWIF {s['value']:.4f} "
            f"[{s['low']:.4f}, {s['high']:.4f}] vs i.i.d. {b['ewif_iid']:.4f} "
            f"(i.i.d. error {b['relative_error']:+.1%})"
        )
    if "replay" in out:
        rp = out["replay"]
        lines.append(
            f"trace replay over {rp['prompts']} measuring prompts (mean {rp['mean_length']:.1f} "
            f"tokens): {rp['speedup']:.4f}x [{rp['low']:.4f}, {rp['high']:.4f}] (90%) vs exact "
            f"EWIF {rp['ewif_same_lengths']:.4f}x at the same lengths (independent acceptances)"
        )
    verdict = "agrees with" if comparison.agrees(level) else "DISAGREES with"
    lines.append(f"verdict: simulation {verdict} the exact theory (Bonferroni, {level:.1%})")
    if "plot" in out:
        lines.append(f"plot written to {out['plot']}")
    return "\n".join(lines)
