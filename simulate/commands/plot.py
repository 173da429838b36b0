"""``csd plot KIND ... -o PATH``: the project's figures from the command line.

Kinds (each is one function of :mod:`simulate.plotting`):

* ``decay`` — acceptance by draft position: i.i.d. α^i, the cascade's exact curve,
  simulated points (``--trials``, ``--seed``) and, with ``--measured FILE`` (a
  ``csd.results/1`` run or a ``csd.models/1`` set with ``alpha_by_position``), measured
  points with intervals.
* ``ewif-vs-k`` — EWIF against draft length for SD, the vertical and the horizontal
  cascade, each optimum marked; from ``--alpha/--cost`` numbers or a model set.
* ``landscape`` — EWIF heat map over two K entries around a cascade, the others fixed.
* ``tree`` — a token tree, each node shaded by ``f(v)`` (:mod:`ewif.plotting.tree`): from
  ``--parents``/``--acceptance``, a set's ``tree`` section, or a set's best tree.
* ``calibration`` — predicted vs measured speedup of a ``csd.results/1`` run.

The cascade of ``decay`` and ``landscape``: ``--K`` if given, else the set's ``cascade``
section, else the recommended one. Prints a short table (``--json``: the plotted numbers).
Bad input (unknown kind, unwritable path, unknown suffix, a file of the wrong schema) is a
one-line error with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

HELP = "write a figure: decay, ewif-vs-k, landscape, tree or calibration (PNG/SVG/PDF by suffix)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(
        dest="kind", metavar="KIND", required=True, title="kinds (csd plot KIND --help)"
    )
    decay = kinds.add_parser("decay", help="acceptance by draft position (Figure 2)")
    _source(decay)
    _cascade(decay)
    decay.add_argument(
        "--trials",
        type=int,
        default=100_000,
        help="simulated target steps (0: no simulation; default 100000)",
    )
    decay.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    decay.add_argument(
        "--level",
        type=float,
        default=0.999,
        help="confidence level of the simulated intervals (default 0.999)",
    )
    decay.add_argument(
        "--max-position",
        type=int,
        default=None,
        help="last draft position shown (default: longest draft, at most 20)",
    )
    decay.add_argument(
        "--measured",
        metavar="FILE",
        help="csd.results/1 run or csd.models/1 set with alpha_by_position",
    )
    decay.add_argument("--method", help="method of the results file to show (default: CSD)")
    decay.add_argument(
        "--pair",
        metavar="R,J",
        help="alpha_by_position pair of a model-set file (default: 0,first)",
    )

    evk = kinds.add_parser("ewif-vs-k", help="EWIF against draft length, optima marked")
    _source(evk)
    evk.add_argument("--alpha", type=float, help="target's acceptance of drafter 1")
    evk.add_argument("--cost", type=float, help="cost of drafter 1 (target pass = 1)")
    evk.add_argument("--alpha2", type=float, help="target's acceptance of drafter 2")
    evk.add_argument("--cost2", type=float, default=0.0, help="cost of drafter 2 (default 0)")
    evk.add_argument("--alpha12", type=float, help="drafter 1's acceptance of drafter 2")
    evk.add_argument(
        "--models",
        nargs=3,
        metavar=("TARGET", "D1", "D2"),
        help="with --preset/--from: the target and the two drafters",
    )
    evk.add_argument(
        "--lenience",
        type=float,
        default=1.0,
        help="with --preset/--from: lenience of drafter 1's reviews (default 1)",
    )
    evk.add_argument("--k-max", type=int, default=20, help="last draft length (default 20)")

    land = kinds.add_parser("landscape", help="EWIF heat map over two K entries")
    _source(land)
    _cascade(land)
    land.add_argument(
        "--entries",
        nargs=2,
        metavar="RJ",
        help="the two K entries as 1-based r,j pairs, e.g. 1,1 2,2 "
        "(default: the two that matter most)",
    )
    land.add_argument("--k-max", type=int, default=30, help="largest budget (default 30)")

    _tree_kind(kinds)
    cal = kinds.add_parser("calibration", help="predicted vs measured speedup of a run")
    cal.add_argument("results", metavar="RESULTS", help="csd.results/1 file (csd realrun)")
    _common(cal)


def _tree_kind(kinds) -> None:
    tree = kinds.add_parser("tree", help="a token tree, each node shaded by f(v) = P(accepted)")
    _source(tree)
    tree.add_argument("--parents", metavar="JSON", help="parent list, e.g. '[-1,0,0,1]'")
    tree.add_argument("--ranks", metavar="JSON", help="ranks among siblings (default 1, 2, ...)")
    tree.add_argument("--acceptance", metavar="JSON", help="rank vector, e.g. '[0.6,0.2]'")
    tree.add_argument("--nodes", type=int, default=16, help="best tree's nodes (default 16)")
    tree.add_argument("--depth", type=int, default=6, help="best tree's depth (default 6)")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o", "--output", required=True, metavar="PATH", help="figure to write; .png, .svg or .pdf"
    )
    p.add_argument("--title", help="figure title (default: a descriptive one)")
    p.add_argument("--json", action="store_true", help="print the plotted numbers as JSON")


def _source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help="embedded preset (see 'csd presets'; default flan-t5-ms)")
    src.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="csd.models/1 model-set file (JSON or YAML)",
    )
    _common(p)


def _cascade(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="models of the cascade, target first (default: the set's)",
    )
    p.add_argument(
        "--K", dest="K", metavar="JSON", help="budgets as a JSON matrix, e.g. '[[2,10],[0,10]]'"
    )
    p.add_argument("--lenience", type=float, default=None, help="lenience (default: the set's)")


def run(args: argparse.Namespace) -> int:
    from ewif.plotting import calibration, decay, ewif_vs_k, landscape, style
    from ewif.plotting import tree as tree_plot
    from simulate import plotting

    style.output_path(args.output)  # fail before any work
    if args.kind == "calibration":
        data = calibration.compute_calibration(args.results)
        path = calibration.draw_calibration(data, args.output, title=args.title)
        summary = data.to_dict()
    elif args.kind == "tree":
        data = _tree_data(args)
        path = tree_plot.draw_tree(data, args.output, title=args.title)
        summary = data.to_dict()
    elif args.kind == "ewif-vs-k":
        curves = ewif_vs_k.compute_ewif_vs_k(k_max=args.k_max, **_ewif_vs_k_inputs(args, plotting))
        path = ewif_vs_k.draw_ewif_vs_k(curves, args.output, title=args.title)
        summary = {"curves": [c.to_dict() for c in curves]}
    else:
        ms = plotting.model_set(args.preset, args.from_file)
        cascade = plotting.cascade_for(ms, args.models, _matrix(args.K), args.lenience)
        if args.kind == "decay":
            measured = None
            if args.measured:
                measured = plotting.measured_curve(
                    args.measured, method=args.method, pair=_pair(args.pair, "--pair")
                )
            data = decay.compute_decay(cascade, max_position=args.max_position, measured=measured)
            if args.trials:
                simulated = plotting.simulated_points(
                    cascade,
                    data.exact.size,
                    trials=args.trials,
                    seed=args.seed,
                    level=args.level,
                    progress=sys.stderr.isatty() and not args.json,
                )
                data = replace(data, simulated=simulated)
            path = decay.draw_decay(data, args.output, title=args.title)
        else:
            from ewif.search.landscape import landscape_of

            entries = None
            if args.entries:
                entries = tuple(_pair(e, "--entries") for e in args.entries)
            data = landscape_of(ms, cascade, entries=entries, k_max=args.k_max)
            path = landscape.draw_landscape(data, args.output, title=args.title)
        summary = data.to_dict()
    out = {"kind": args.kind, "path": str(path), **summary}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(_human(out))
    return 0


def _tree_data(args: argparse.Namespace):
    """``csd plot tree``: ``--parents`` and ``--acceptance``, or a set's tree section, or the
    best tree of a set (:func:`ewif.plotting.tree.tree_of`)."""
    from ewif.base import validate
    from ewif.files.tree_models import load_tree
    from ewif.plotting import tree as tree_plot
    from ewif.search.recommendation import load_model_set

    validate.count("--nodes", args.nodes, minimum=1)
    validate.count("--depth", args.depth)
    if args.parents is not None or args.acceptance is not None:
        if args.parents is None or args.acceptance is None or args.preset or args.from_file:
            raise ValueError("give --parents and --acceptance together, without --preset/--from")
        ranks = None if args.ranks is None else _json("--ranks", args.ranks)
        p = _json("--acceptance", args.acceptance)
        return tree_plot.compute_tree(_json("--parents", args.parents), p, ranks)
    if args.from_file:
        ms, config = load_tree(args.from_file)
    else:
        ms, config = load_model_set(args.preset, None)[0], None
    return tree_plot.tree_of(ms, config, args.nodes, args.depth)


def _json(option: str, text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f"{option} must be a JSON list, got {text!r}") from None


def _ewif_vs_k_inputs(args: argparse.Namespace, plotting) -> dict:
    numbers = args.alpha is not None or args.cost is not None
    if numbers and (args.preset or args.from_file):
        raise ValueError("give --alpha/--cost numbers or --preset/--from, not both")
    if numbers:
        if args.alpha is None or args.cost is None:
            raise ValueError("--alpha and --cost are both required (drafter 1)")
        return {
            "alpha1": args.alpha,
            "c1": args.cost,
            "alpha2": args.alpha2,
            "c2": args.cost2,
            "alpha12": args.alpha12,
        }
    ms = plotting.model_set(args.preset, args.from_file)
    return plotting.ewif_vs_k_inputs(ms, args.models, args.lenience)


def _matrix(text: str | None):
    from ewif.base import validate

    return None if text is None else validate.json_matrix("--K", text)


def _pair(text: str | None, option: str) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        r, j = (int(s) for s in text.split(","))
    except ValueError:
        raise ValueError(f"{option} takes pairs R,J of integers, got {text!r}") from None
    return r, j


def _human(s: dict) -> str:
    lines = [f"csd plot {s['kind']}: wrote {s['path']}"]
    if s["kind"] == "ewif-vs-k":
        lines.append(f"  {'curve':<58} {'best':>8} {'EWIF':>8}")
        for c in s["curves"]:
            lines.append(f"  {c['label']:<58} {c['best_k']:>8} {c['best_ewif']:>8.4f}")
    elif s["kind"] == "calibration":
        lines.append(f"  {'method':<28} {'predicted':>9} {'measured':>9} {'SWI':>7} {'error':>8}")
        for m in s["methods"]:
            lines.append(
                f"  {m['name']:<28} {_f(m['predicted']):>9} {_f(m['measured']):>9} "
                f"{_f(m['swi']):>7} {_pct(m['error']):>8}"
            )
    elif s["kind"] == "tree":
        lines.append(
            f"  {len(s['parents'])} nodes, E[tokens per step] = {s['expected_tokens']:.4f}; "
            f"f(v): {' '.join(f'{x:.3f}' for x in s['f'])}"
        )
    elif s["kind"] == "landscape":
        best = ", ".join(f"{k}={v}" for k, v in s["grid_best"].items() if k != "ewif")
        lines += [
            f"  cascade    : {s['cascade']}  EWIF {s['ewif']:.4f}",
            f"  entries    : {' × '.join(s['entries'])}",
            f"  grid best  : {best}  EWIF {s['grid_best']['ewif']:.4f}",
        ]
    else:
        lines.append(f"  cascade: {s['cascade']}   i.i.d. alpha {s['alpha_iid']:.4g}")
        sim, meas = s.get("simulated"), s.get("measured")
        head = f"  {'i':>3} {'alpha^i':>8} {'exact':>8}"
        head += f" {'simulated [interval]':>26}" if sim else ""
        head += f" {'measured [interval]':>26}" if meas else ""
        lines.append(head)
        for n, i in enumerate(s["positions"]):
            row = f"  {i:>3} {s['alpha_iid'] ** i:>8.4f} {s['exact'][n]:>8.4f}"
            for part in (sim, meas):
                if part:
                    row += f" {_interval(part, n):>26}"
            lines.append(row)
        if sim:
            lines.append(f"  {sim['label']}")
        if meas:
            lines.append(
                f"  {meas['label']}; "
                + (
                    f"{meas['trials']:,} target steps, Wilson intervals"
                    if meas["trials"]
                    else "no step count in the file: no interval"
                )
            )
    return "\n".join(lines)


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _interval(part: dict, n: int) -> str:
    p, lo, hi = part["p"][n], part["low"][n], part["high"][n]
    return "-" if p is None else f"{p:.4f} [{lo:.4f}, {hi:.4f}]"
