"""``csd realrun``: run the recommended (or a given) cascade and the baselines on real models,
predicted vs measured on held-out prompts.

Example::

    csd realrun path/to/target.gguf path/to/drafter.gguf --mag --measure-prompts 4 \\
        --limit 8 -o results.json --plot calibration.png

The first ``--measure-prompts`` prompts of ``--prompts`` are the measuring split (α, cost
curves and, with ``--dtype auto``/``--threads auto`` on a CPU, the numerics); every method
then runs on the next ``--limit`` prompts (held out). ``--from FILE`` skips the measurement
(then give ``--dtype`` and ``--threads`` as measured). The cascade is ``--K`` (a JSON matrix
over all given models, target first) with ``--lenience``, else ewif's recommendation — which
says plainly when nothing beats autoregressive decoding. ``--plot PATH`` writes the
predicted-vs-measured figure to ``PATH`` and the acceptance-by-position figure of the
cascade next to it (``_decay`` added to its stem).
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
        help="measured model-set file (default: measure first)",
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
    parser.add_argument("--lenience", type=float, default=1.0)
    parser.add_argument("--no-baselines", action="store_true", help="run only AR and the cascade")
    parser.add_argument("-o", "--output", help="results file to write (csd.results/1 JSON)")
    parser.add_argument("--plot", metavar="PATH", help="figure path (.png/.svg/.pdf)")


def run(args: argparse.Namespace) -> int:
    from transformers.utils import logging as hf_logging

    from ewif.files import model_set as model_io
    from ewif.files import results as results_io
    from realrun.pipeline import run_pipeline
    from realrun.results_tables import format_results

    hf_logging.disable_progress_bar()
    if args.plot:
        from ewif.plotting import style

        style.output_path(args.plot)
    from ewif.base import validate

    K = None if args.K is None else validate.json_matrix("--K", args.K)
    results = run_pipeline(
        args.models,
        prompts=args.prompts,
        measure_prompts=args.measure_prompts,
        limit=args.limit,
        model_set=model_io.load(args.model_set) if args.model_set else None,
        K=K,
        lenience=args.lenience,
        baselines=not args.no_baselines,
        held_out_categories=[c for c in args.held_out_categories.split(",") if c],
        **model_options(args),
    )
    if args.output:
        results_io.save(results, args.output)
    if args.plot:
        _plots(results, Path(args.plot))
    if args.json:
        print(json.dumps(results.to_dict(), indent=2))
    else:
        print(format_results(results))
    return cli.INTERRUPTED if results.metadata.get("interrupted") else 0


def _plots(results, path: Path) -> None:
    import numpy as np

    from ewif.files.model_set import ModelSet
    from ewif.plotting.calibration import compute_calibration, draw_calibration
    from ewif.plotting.decay import compute_decay, draw_decay
    from simulate.plotting import measured_curve

    draw_calibration(
        compute_calibration(results),
        path,
        title=f"Predicted vs measured speed-up: {results.family}",
    )
    csd = next((m for m in results.methods if m.kind == "csd" and m.acceptance_by_position), None)
    if csd is None:
        return
    model_set = ModelSet.from_dict(results.metadata["model_set"])
    cascade = model_set.to_cascade(
        csd.config["models"], np.array(csd.config["K"]), csd.config["lenience"]
    )
    data = compute_decay(cascade, measured=measured_curve(results, method=csd.name))
    draw_decay(
        data,
        path.with_name(f"{path.stem}_decay{path.suffix}"),
        title=f"Acceptance by draft position: {csd.name}",
    )
