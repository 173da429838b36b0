"""``csd plot KIND ... -o PATH``: the project's figures from the command line.

Kinds (each a ``compute_…``/``draw_…`` pair of :mod:`ewif.plotting`; simulated and measured
points with their intervals from :mod:`simulate.plotting`):

* ``decay`` — acceptance by draft position: i.i.d. α^i, the cascade's exact curve,
  simulated points (``--trials``, ``--seed``) and, with ``--measured FILE`` (a
  ``csd.results/1`` run or a model set with ``alpha_by_position``), measured points with
  intervals. A run is plotted with its own model set and the cascade it measured (a
  different ``--K`` is refused).
* ``ewif-vs-k`` — EWIF against draft length for SD, the vertical and the horizontal
  cascade, each optimum marked; from ``--alpha/--cost`` numbers or a model set.
* ``landscape`` — EWIF heat map over two K entries around a cascade, the others fixed.
* ``tree`` — a token tree, each node shaded by ``f(v)`` (:mod:`ewif.plotting.tree`): from
  ``--parents``/``--acceptance``, a set's ``tree`` section, or a set's best tree.
* ``calibration`` — predicted vs measured speedup of a ``csd.results/1`` run.

The cascade of ``decay`` and ``landscape``: ``--K`` if given, else the set's ``cascade``
section, else the recommended one (:func:`ewif.search.recommendation.choose_cascade`, the rule
``csd simulate`` follows too). Prints a short table (``--json``: the plotted data). Every
option that sizes the work is checked first (:mod:`ewif.base.limits`). Bad input (unknown
kind, unwritable path, unknown suffix, a file of the wrong schema, too much work) is a
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
    _decay_arguments(_kind(kinds, "decay", "acceptance by draft position (Figure 2)"))
    _ewif_vs_k_arguments(_kind(kinds, "ewif-vs-k", "EWIF against draft length, optima marked"))
    land = _kind(kinds, "landscape", "EWIF heat map over two K entries")
    _source(land)
    _cascade(land)
    land.add_argument(
        "--entries",
        nargs=2,
        metavar="RJ",
        help="the two K entries as 1-based r,j pairs, e.g. 1,1 2,2 "
        "(default: the two that matter most)",
    )
    land.add_argument(
        "--k-max", type=int, default=30, help="largest budget (default 30, at most 100)"
    )
    _tree_kind(kinds)
    cal = _kind(kinds, "calibration", "predicted vs measured speedup of a run")
    cal.add_argument("results", metavar="RESULTS", help="csd.results/1 file (csd realrun)")
    _common(cal)


def _decay_arguments(decay: argparse.ArgumentParser) -> None:
    """The options of ``csd plot decay``."""
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
        help="csd.results/1 run (its own model set and cascade are plotted) or a model-set "
        "file (csd.models/1-6) with alpha_by_position",
    )
    decay.add_argument(
        "--method", help="with a run: the method whose curve is shown (default: its CSD)"
    )
    decay.add_argument(
        "--pair",
        metavar="R,J",
        help="with a model-set file: its alpha_by_position pair (default: 0,first)",
    )


def _ewif_vs_k_arguments(evk: argparse.ArgumentParser) -> None:
    """The options of ``csd plot ewif-vs-k``."""
    _source(evk)
    evk.add_argument("--alpha", type=float, help="target's acceptance of drafter 1")
    evk.add_argument("--cost", type=float, help="cost of drafter 1 (target pass = 1)")
    evk.add_argument("--alpha2", type=float, help="target's acceptance of drafter 2")
    evk.add_argument("--cost2", type=float, default=0.0, help="cost of drafter 2 (default 0)")
    evk.add_argument("--alpha12", type=float, help="drafter 1's acceptance of drafter 2")
    evk.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="with --preset/--from: the target and the two drafters (commas or spaces)",
    )
    evk.add_argument(
        "--lenience",
        type=float,
        default=1.0,
        help="with --preset/--from: lenience of drafter 1's reviews (default 1)",
    )
    evk.add_argument(
        "--k-max",
        type=int,
        default=20,
        help="last draft length (default 20, at most 200; widened to hold plain SD's optimum)",
    )


def _kind(kinds, name: str, text: str) -> argparse.ArgumentParser:
    """The sub-parser of ``csd plot NAME``: ``text`` is its help line and its description."""
    return kinds.add_parser(name, help=text, description=f"csd plot {name}: {text}")


def _tree_kind(kinds) -> None:
    tree = _kind(kinds, "tree", "a token tree, each node shaded by f(v) = P(accepted)")
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
    p.add_argument("--json", action="store_true", help="print the plotted data as JSON")


def _source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", help="embedded preset (see 'csd presets'; default flan-t5-ms)")
    src.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="model-set file (csd.models/1-6, JSON or YAML), or a results file "
        "(csd.results/1: the model set its run used)",
    )
    _common(p)


def _cascade(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="models of the cascade, target first, separated by commas or spaces (needs --K)",
    )
    p.add_argument(
        "--K", dest="K", metavar="JSON", help="budgets as a JSON matrix, e.g. '[[2,10],[0,10]]'"
    )
    p.add_argument("--lenience", type=float, default=None, help="lenience (default: the set's)")


def run(args: argparse.Namespace) -> int:
    from ewif.plotting import style

    style.output_path(args.output)  # fail before any work
    _check_work(args)  # and refuse what would not finish in about a minute
    draw = {
        "calibration": _calibration,
        "ewif-vs-k": _ewif_vs_k,
        "decay": _decay,
        "landscape": _landscape,
        "tree": _tree,
    }[args.kind]
    path, summary = draw(args)
    out = {"kind": args.kind, "path": str(path), **summary}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(_human(out))
    return 0


def _tree(args: argparse.Namespace) -> tuple[object, dict]:
    from ewif.plotting import tree as tree_plot

    data = _tree_data(args)
    return tree_plot.draw_tree(data, args.output, title=args.title), data.to_dict()


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


def _check_work(args: argparse.Namespace) -> None:
    """Every option that sizes a plot's work, checked before any work
    (:mod:`ewif.base.limits`), and the options that only make sense with another."""
    from ewif.base import limits, validate
    from ewif.plotting.ewif_vs_k import MAX_K

    if args.kind == "decay":
        validate.count("--trials", args.trials)
        limits.at_most("--trials", args.trials, limits.MAX_TRIALS, "target steps")
        if not 0.0 < validate.probability("--level", args.level) < 1.0:
            raise ValueError(f"--level must be strictly between 0 and 1, got {args.level!r}")
        if args.max_position is not None:
            validate.count("--max-position", args.max_position, minimum=1)
            limits.at_most(
                "--max-position", args.max_position, limits.MAX_PLOT_POSITIONS, "draft positions"
            )
        if args.measured is None and (args.method or args.pair):
            option = "--method" if args.method else "--pair"
            raise ValueError(f"{option} chooses a curve of --measured FILE; give --measured too")
    elif args.kind == "landscape":
        validate.count("--k-max", args.k_max, minimum=1)
        limits.at_most(
            "--k-max",
            args.k_max,
            limits.MAX_LANDSCAPE_K,
            "for a landscape (its grid evaluates k_max² cascades)",
        )
    elif args.kind == "ewif-vs-k":
        validate.count("--k-max", args.k_max, minimum=1)
        limits.at_most("--k-max", args.k_max, MAX_K, "tokens (the plotted range)")


def _calibration(args: argparse.Namespace) -> tuple[object, dict]:
    from ewif.plotting import calibration

    data = calibration.compute_calibration(args.results)
    return calibration.draw_calibration(data, args.output, title=args.title), data.to_dict()


def _ewif_vs_k(args: argparse.Namespace) -> tuple[object, dict]:
    from ewif.plotting import ewif_vs_k

    curves = ewif_vs_k.compute_ewif_vs_k(k_max=args.k_max, **_ewif_vs_k_inputs(args))
    path = ewif_vs_k.draw_ewif_vs_k(curves, args.output, title=args.title)
    summary: dict = {"curves": [c.to_dict() for c in curves]}
    drawn = int(curves[0].k[-1])
    if drawn != args.k_max:
        summary["note"] = (
            f"drawn to k = {drawn}, past --k-max {args.k_max}, to hold plain SD's optimum"
        )
    return path, summary


def _decay(args: argparse.Namespace) -> tuple[object, dict]:
    from ewif.plotting import decay
    from ewif.plotting.measured import read_measured
    from simulate import plotting

    measured = None
    if args.measured:
        measured = read_measured(args.measured, method=args.method, pair=_pair(args.pair, "--pair"))
        if args.pair and measured.config is not None:
            raise ValueError("--pair chooses a curve of a model-set file; for a run give --method")
    ms, where = _model_set_of(args, measured)
    chosen = _decay_cascade(args, ms, measured)
    points = None if measured is None else plotting.measured_curve(measured)
    data = decay.compute_decay(chosen.cascade, max_position=args.max_position, measured=points)
    if args.trials:
        simulated = plotting.simulated_points(
            chosen.cascade,
            data.exact.size,
            trials=args.trials,
            seed=args.seed,
            level=args.level,
            progress=sys.stderr.isatty() and not args.json,
        )
        data = replace(data, simulated=simulated)
    path = decay.draw_decay(data, args.output, title=args.title)
    return path, {"source": where, "chosen": chosen.how, **data.to_dict()}


def _model_set_of(args: argparse.Namespace, measured=None):
    """``(model set, where it came from)``: ``--preset``/``--from``, else the model set the
    ``--measured`` file was measured with (a run's own), else the default preset."""
    from ewif.search.recommendation import load_model_set

    if measured is not None and args.preset is None and args.from_file is None:
        if measured.model_set is None:
            raise ValueError(
                f"--measured {args.measured}: the run keeps no model set (metadata.model_set); "
                "give the one it was measured with (--from FILE or --preset NAME)"
            )
        return measured.model_set, f"the model set of {args.measured}"
    return load_model_set(args.preset, args.from_file)


def _decay_cascade(args: argparse.Namespace, ms, measured):
    """The cascade of the decay figure: the measured run method's own (``--measured RUN``
    without ``--K``), else the one rule (:func:`~ewif.search.recommendation.choose_cascade`);
    a cascade other than the one measured is refused."""
    from ewif.search.recommendation import choose_cascade

    models = None if args.models is None else _names(args.models)
    K = _matrix(args.K)
    config = None if measured is None else measured.config
    if config is not None and K is None and models is None:
        lenience = config["lenience"] if args.lenience is None else args.lenience
        chosen = choose_cascade(ms, config["models"], config["K"], lenience)
        chosen = replace(chosen, how="the cascade the run measured")
    else:
        chosen = choose_cascade(ms, models, K, args.lenience)
    if config is not None:
        ran = (list(config["models"]), config["K"], float(config["lenience"]))
        plotted = (list(chosen.cascade.names), chosen.cascade.K.tolist(), chosen.lenience)
        if ran != plotted:
            raise ValueError(
                f"--measured {args.measured} ran {' > '.join(ran[0])} K={ran[1]} lenience "
                f"{ran[2]:g}, not the plotted {' > '.join(plotted[0])} K={plotted[1]} lenience "
                f"{plotted[2]:g}; drop --K/--models/--lenience to plot the run's own cascade"
            )
    elif measured is not None:
        missing = [m for m in measured.models if m not in ms.models]
        if missing:
            raise ValueError(
                f"--measured {args.measured} measured {', '.join(measured.models)}, but the "
                f"plotted model set has no {', '.join(missing)}"
            )
    return chosen


def _landscape(args: argparse.Namespace) -> tuple[object, dict]:
    from ewif.plotting import landscape
    from ewif.search.landscape import landscape_of
    from ewif.search.recommendation import choose_cascade

    ms, where = _model_set_of(args)
    models = None if args.models is None else _names(args.models)
    chosen = choose_cascade(ms, models, _matrix(args.K), args.lenience)
    entries = None
    if args.entries:
        entries = tuple(_pair(e, "--entries") for e in args.entries)
    data = landscape_of(ms, chosen.cascade, entries=entries, k_max=args.k_max)
    path = landscape.draw_landscape(data, args.output, title=args.title)
    return path, {"source": where, "chosen": chosen.how, **data.to_dict()}


def _ewif_vs_k_inputs(args: argparse.Namespace) -> dict:
    from ewif.plotting.ewif_vs_k import inputs_of

    numbers = args.alpha is not None or args.cost is not None
    if numbers and (args.preset or args.from_file):
        raise ValueError("give --alpha/--cost numbers or --preset/--from, not both")
    if numbers:
        if args.alpha is None or args.cost is None:
            raise ValueError("--alpha and --cost are both required (drafter 1)")
        if args.models is not None:
            raise ValueError("--models names models of --preset/--from, not of --alpha/--cost")
        return {
            "alpha1": args.alpha,
            "c1": args.cost,
            "alpha2": args.alpha2,
            "c2": args.cost2,
            "alpha12": args.alpha12,
        }
    if any(v is not None for v in (args.alpha2, args.alpha12)):
        raise ValueError("--alpha2/--alpha12 go with --alpha/--cost, not a model set")
    ms, _ = _model_set_of(args)
    return inputs_of(ms, None if args.models is None else _names(args.models), args.lenience)


def _names(values) -> tuple[str, ...]:
    from ewif.base import validate

    return validate.names("--models", values)


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
        lines.append(f"  {'curve':<62} {'best':>6} {'EWIF':>8}")
        for c in s["curves"]:
            lines.append(f"  {c['label']:<62} {c['best_k']:>6} {c['best_ewif']:>8.4f}")
        if "note" in s:
            lines.append(f"  note: {s['note']}")
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
            f"  chosen     : {s['chosen']} ({s['source']})",
            f"  entries    : {' × '.join(s['entries'])}",
            f"  grid best  : {best}  EWIF {s['grid_best']['ewif']:.4f}",
        ]
    else:
        lines.append(f"  cascade: {s['cascade']}   i.i.d. alpha {s['alpha_iid']:.4g}")
        lines.append(f"  ({s['chosen']}; {s['source']})")
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
            steps = f" over {meas['trials']:,} target steps" if meas["trials"] else ""
            lines.append(f"  {meas['label']}{steps}")
    return "\n".join(lines)


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _interval(part: dict, n: int) -> str:
    p, lo, hi = part["p"][n], part["low"][n], part["high"][n]
    return "-" if p is None else f"{p:.4f} [{lo:.4f}, {hi:.4f}]"
