"""``csd realrun``: run a cascade and the baselines on real models; predicted vs measured.

Example::

    csd realrun path/to/target path/to/drafter --mag --from measured.json --limit 20 \\
        -o results.json --plot calibration.png

Without ``--from`` the models are measured first (as ``csd measure``, on ``--measure-prompts``
prompts). The cascade is ``--K`` (a JSON matrix over all given models, target first) with
``--lenience``, else the ewif recommendation for the measured set. ``--plot PATH`` writes
the predicted-vs-measured speed-up figure to ``PATH`` and the acceptance-by-position figure
of the cascade to ``PATH`` with ``_decay`` added to its stem.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from realrun.commands.measure import add_model_arguments, load_chain

HELP = "run the recommended (or a given) cascade and the baselines on real models"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--from", dest="model_set", metavar="FILE",
                        help="measured model-set file (default: measure first)")
    parser.add_argument("--measure-prompts", type=int, default=4)
    parser.add_argument("--K", help="cascade budgets as JSON, e.g. '[[2,10],[0,10]]'")
    parser.add_argument("--lenience", type=float, default=1.0)
    parser.add_argument("--k-max", type=int, default=12, help="largest K entry searched")
    parser.add_argument("--no-baselines", action="store_true",
                        help="run only AR and the cascade")
    parser.add_argument("-o", "--output", help="results file to write (csd.results/1 JSON)")
    parser.add_argument("--plot", metavar="PATH", help="figure path (.png/.svg/.pdf)")


def _cascade(args, names, model_set):
    from realrun.run import Method, cascade_method

    if args.K is None:
        if args.lenience != 1.0:
            raise ValueError("--lenience needs --K (the recommendation chooses its own lenience)")
        return None
    try:
        K = json.loads(args.K)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"--K must be a JSON matrix such as '[[2,10],[0,10]]': {exc.msg}"
        ) from None
    method = cascade_method(f"CSD {K} l={args.lenience:g}", "csd", names, K, args.lenience)
    if args.lenience != 1.0 and not any(any(row) for row in method.K[1:]):
        raise ValueError(
            f"--lenience {args.lenience:g} would apply at the target, the only reviewer of this "
            "K; lenience is allowed only where a drafter reviews (it would change the output)"
        )
    if args.lenience not in model_set.alpha:
        raise ValueError(f"--lenience {args.lenience:g} was not measured; the model set has "
                         f"{', '.join(f'{x:g}' for x in model_set.leniences)}")
    return Method(method.name, method.kind, method.models, method.K, method.lenience)


def run(args: argparse.Namespace) -> int:
    from ewif import io as model_io
    from ewif import results as results_io
    from realrun.hf_model import HFTokenModel
    from realrun.measure import measure
    from realrun.report import format_results
    from realrun.run import default_methods
    from realrun.run import run as run_methods

    if args.plot:
        from ewif.plotting import style

        style.output_path(args.plot)
    chain, tokenizer, ids, decoding = load_chain(args)
    names = [m.name for m in chain]
    eos = tokenizer.eos_token_id
    if args.model_set:
        model_set = model_io.load(args.model_set)
        if tuple(model_set.models) != tuple(names):
            raise ValueError(f"{args.model_set} describes models {list(model_set.models)}, "
                             f"but the run loaded {names}")
    else:
        model_set = measure(chain, ids[: args.measure_prompts], max_new_tokens=args.max_new_tokens,
                            max_m=args.k_max, decoding=decoding, eos_token_id=eos)
    csd = _cascade(args, names, model_set)
    neural = [m.name for m in chain[1:] if isinstance(m, HFTokenModel)]
    methods = default_methods(model_set, neural, csd=csd, k_max=args.k_max)
    if args.no_baselines:
        methods = [m for m in methods if m.kind in ("autoregressive", "csd")]
    if not decoding.greedy:
        methods = [m for m in methods if not m.kind.startswith("hf-")]
    device = str(next(m for m in chain if isinstance(m, HFTokenModel)).model.device)
    results = run_methods(methods, {m.name: m for m in chain}, ids, model_set=model_set,
                          max_new_tokens=args.max_new_tokens, eos_token_id=eos,
                          decoding=decoding, device=device, family=" > ".join(names))
    if args.output:
        results_io.save(results, args.output)
    if args.plot:
        _plots(results, model_set, Path(args.plot))
    if args.json:
        print(json.dumps(results.to_dict(), indent=2))
    else:
        print(format_results(results))
    return 0


def _plots(results, model_set, path: Path) -> None:
    import numpy as np

    from ewif.cascade import Cascade
    from ewif.plotting.calibration import plot_calibration
    from ewif.plotting.decay import plot_decay

    plot_calibration(results, path, title=f"Predicted vs measured speed-up: {results.family}")
    csd = next((m for m in results.methods if m.kind == "csd" and m.acceptance_by_position),
               None)
    if csd is None:
        return
    measured = np.asarray(csd.acceptance_by_position["measured"])
    # normal-approximation 95% interval; n = target steps ≈ tokens / accepted per step
    steps = max(1, round(csd.tokens / csd.mean_accepted_length)) if csd.tokens else 1
    half = 1.96 * np.sqrt(measured * (1 - measured) / steps)
    cascade = Cascade.from_model_set(model_set, csd.config["models"], np.array(csd.config["K"]),
                                     csd.config["lenience"])
    plot_decay(path.with_name(f"{path.stem}_decay{path.suffix}"),
               cascade.acceptance_by_position(measured.size),
               float(model_set.alpha[1.0][0, 1]),
               measured=(measured, np.clip(measured - half, 0, 1), np.clip(measured + half, 0, 1)),
               title=f"Acceptance by draft position: {csd.name}")
