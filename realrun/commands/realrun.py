"""``csd realrun``: run the recommended (or a given) cascade and the baselines on real models,
predicted vs measured on held-out prompts.

Example::

    csd realrun path/to/target.gguf path/to/drafter.gguf --mag --measure-prompts 4 \\
        --limit 8 -o results.json --plot calibration.png

The first ``--measure-prompts`` prompts of ``--prompts`` are the measuring split (α, cost
curves and, with ``--dtype auto``/``--threads auto`` on a CPU, the numerics); every method
then runs on the next ``--limit`` prompts (held out). ``--from FILE`` skips the measurement
(then give ``--dtype`` and ``--threads`` as measured; a results file gives its run's model set).
The cascade is ``--K`` (a JSON matrix over all given models, target first) with
``--lenience``, else ewif's recommendation — which says plainly when nothing beats
autoregressive decoding; ``--trees`` adds the token-tree search's recommendation, its best
tree and its best chain (:mod:`realrun.tree_methods`). ``--plot PATH`` writes the
predicted-vs-measured figure to ``PATH`` and the acceptance-by-position figure of the cascade
next to it (``-decay`` added to its stem, as ``csd recommend --plot`` names its figures).
Every argument is checked before any model is loaded or converted (:mod:`realrun.arguments`);
the report leads with its decision and ends with the files it wrote.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ewif import cli
from realrun.commands.measure import add_model_arguments, model_options

HELP = "run the recommended (or a given) cascade and the baselines on real models"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument(
        "--from",
        dest="model_set",
        metavar="FILE",
        help="measured model-set file, or a results file (its run's model set); default: "
        "measure first",
    )
    parser.add_argument(
        "--measure-prompts",
        type=int,
        default=4,
        help="measure on the first N prompts (the measuring split)",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="run on the next N prompts (the held-out split; default: all)",
    )
    parser.add_argument(
        "--held-out-categories",
        metavar="NAME,NAME",
        default="",
        help="prompt categories left out of the measuring split (held out whole)",
    )
    parser.add_argument("--K", help="cascade budgets as JSON, e.g. '[[2,10],[0,10]]'")
    parser.add_argument(
        "--lenience",
        type=float,
        default=1.0,
        help="with --K: how far drafters' reviews of drafters loosen acceptance (one of the "
        "leniences measured; the target's review is always exact)",
    )
    parser.add_argument("--no-baselines", action="store_true", help="run only AR and the cascade")
    parser.add_argument(
        "--trees",
        action="store_true",
        help="also run the token-tree search's recommendation, best tree and best chain",
    )
    parser.add_argument("-o", "--output", help="results file to write (csd.results/1 JSON)")
    parser.add_argument(
        "--plot",
        metavar="PATH",
        help="write the predicted-vs-measured figure to PATH and the acceptance-by-position "
        "figure to STEM-decay.SUF (png/svg/pdf)",
    )


def run(args: argparse.Namespace) -> int:
    from ewif.base import validate
    from realrun.arguments import check_realrun

    K = None if args.K is None else validate.json_matrix("--K", args.K)
    paths = _plot_paths(args.plot) if args.plot else []
    given = check_realrun(args, K)  # every argument, before any model is loaded or converted
    from transformers.utils import logging as hf_logging

    from ewif.files import results as results_io
    from realrun.pipeline import run_pipeline
    from realrun.results_tables import format_results

    hf_logging.disable_progress_bar()
    results = run_pipeline(
        args.models,
        prompts=args.prompts,
        measure_prompts=args.measure_prompts,
        limit=args.limit,
        model_set=given,
        K=K,
        lenience=args.lenience,
        baselines=not args.no_baselines,
        trees=args.trees,
        held_out_categories=[c for c in args.held_out_categories.split(",") if c],
        **model_options(args),
    )
    written = [str(results_io.save(results, args.output))] if args.output else []
    if paths:
        written += [str(p) for p in _plots(results, paths)]
    if args.json:
        print(json.dumps(results.to_dict() | {"written": written}, indent=2))
    else:
        print(format_results(results))
        print("written: " + (", ".join(written) if written else "nothing (give -o or --plot)"))
    return cli.INTERRUPTED if results.metadata.get("interrupted") else 0


def _plot_paths(path: str) -> list[Path]:
    """The calibration figure at ``path`` and the decay figure at ``STEM-decay.SUF``, both
    checked writable (the naming of ``csd recommend --plot``)."""
    from ewif.plotting import style

    p = style.output_path(path)
    return [p, style.output_path(p.with_name(f"{p.stem}-decay{p.suffix}"))]


def _plots(results, paths: list[Path]) -> list[Path]:
    """The figures written: the calibration figure and, when the cascade has an
    acceptance-by-position curve, its decay figure."""
    import numpy as np

    from ewif.files.model_set import ModelSet
    from ewif.plotting.calibration import compute_calibration, draw_calibration
    from ewif.plotting.decay import compute_decay, draw_decay
    from realrun.predictions import is_tree_config
    from simulate.plotting import measured_curve

    written = [
        draw_calibration(
            compute_calibration(results),
            paths[0],
            title=f"Predicted vs measured speed-up: {results.family}",
        )
    ]
    csd = next(
        (
            m
            for m in results.methods
            if m.kind == "csd" and m.acceptance_by_position and not is_tree_config(m.config)
        ),
        None,
    )
    if csd is None:
        return written
    model_set = ModelSet.from_dict(results.metadata["model_set"])
    cascade = model_set.to_cascade(
        csd.config["models"], np.array(csd.config["K"]), csd.config["lenience"]
    )
    data = compute_decay(cascade, measured=measured_curve(results, method=csd.name))
    title = f"Acceptance by draft position: {csd.name}"
    return [*written, draw_decay(data, paths[1], title=title)]
