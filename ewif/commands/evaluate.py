"""``csd evaluate FILE``: the exact EWIF of the configuration in a model-set file's ``cascade``.

When the configuration does not beat autoregressive decoding (EWIF <= 1) the output says
so (``"decision"`` in ``--json``); with measured pass-cost curves it lists the review
sizes ``m`` each model's passes use and their cost (:mod:`ewif.search.explain`).
"""

from __future__ import annotations

import argparse
import json

from ewif import cli

HELP = "evaluate the cascade section of a model-set file exactly (EWIF, tokens, cost, passes)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", metavar="FILE", help="model-set file (csd.models/1-6) with a 'cascade' section"
    )
    cli.add_fill_argument(parser)
    parser.add_argument(
        "--positions",
        type=int,
        default=10,
        help="draft positions in the acceptance-by-position curve",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        metavar="N",
        help="also the EWIF of a generation of N tokens, whose last step pays for tokens it "
        "cannot keep (Theorem FL)",
    )
    parser.add_argument(
        "--tree",
        action="store_true",
        help="evaluate the file's 'tree' section (a token-tree configuration, csd.models/6) "
        "instead of its 'cascade'",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    from ewif.base import limits
    from ewif.base.text_table import table
    from ewif.files import model_set as model_io
    from ewif.search.explain import decision, lenience_words, review_lines, review_sizes

    if args.tree:
        return _tree(args)
    ms = model_io.load(args.file)
    if ms.cascade is None:
        raise ValueError(f"{args.file}: no 'cascade' section to evaluate (models, K, lenience)")
    if args.positions < 1:
        raise ValueError(f"--positions must be an integer >= 1, got {args.positions}")
    limits.at_most("--positions", args.positions, limits.MAX_POSITIONS, "draft positions")
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be an integer >= 1, got {args.max_new_tokens}")
    c = ms.to_cascade(fill=args.fill)
    passes, share = c.passes_per_step(), c.swi_breakdown()
    out = {
        "models": list(c.names),
        "K": c.K.tolist(),
        "lenience": ms.cascade.lenience,
        "fill": c.fill,
        "ewif": c.ewif(),
        "expected_tokens": c.expected_tokens(),
        "expected_cost": c.expected_cost(),
        "calls": {m: float(passes[i]) for i, m in enumerate(c.names)},
        "cost_share": {m: float(share[i]) for i, m in enumerate(c.names)},
        "acceptance_by_position": c.acceptance_by_position(args.positions).tolist(),
        "decision": decision(c.ewif()),
        "cost_model": "curve" if c.cost_curve is not None else "affine",
        "review_sizes": review_sizes(c),
    }
    if args.max_new_tokens is not None:
        out["max_new_tokens"] = args.max_new_tokens
        out["ewif_at_length"] = c.ewif(args.max_new_tokens)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"{' > '.join(c.names)}  K={c.K.tolist()}  "
        f"{lenience_words(c.K, ms.cascade.lenience) or 'lenience 1'}  fill={c.fill}"
    )
    print(
        f"EWIF {out['ewif']:.4f}   tokens/step {out['expected_tokens']:.4f}   "
        f"cost/step {out['expected_cost']:.4f}"
    )
    if args.max_new_tokens is not None:
        print(
            f"EWIF of a generation of {args.max_new_tokens} tokens {out['ewif_at_length']:.4f} "
            "(its last step pays for tokens it cannot keep)"
        )
    if out["decision"] == "autoregressive":
        print(
            f"on these costs, decode autoregressively: this configuration reaches "
            f"{out['ewif']:.4f}x (autoregressive decoding is 1x)"
        )
    if out["cost_model"] == "curve":
        print("review sizes (measured pass-cost curves; m = positions per pass):")
        print("\n".join(review_lines(out["review_sizes"])))
    print(
        table(
            ["model", "passes/step", "cost share"],
            [[m, passes[i], f"{share[i] * 100:.1f}%"] for i, m in enumerate(c.names)],
        )
    )
    print("P(position i accepted): " + " ".join(f"{p:.3f}" for p in out["acceptance_by_position"]))
    return 0


def _tree(args: argparse.Namespace) -> int:
    """``--tree``: the exact law of the file's tree configuration (ewif.kernel.tree_cascade)."""
    from ewif.files.tree_models import load_tree, tree_cascade
    from ewif.search.explain import decision
    from ewif.search.tree_explain import configuration_lines, configuration_report

    ms, config = load_tree(args.file)
    if config is None:
        raise ValueError(f"{args.file}: no 'tree' section to evaluate (models, K, review, ...)")
    if args.max_new_tokens is not None and args.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be an integer >= 1, got {args.max_new_tokens}")
    cascade = tree_cascade(ms, config, fill=args.fill)
    out = {"configuration": config.to_dict(), "fill": args.fill}
    out |= configuration_report(cascade, args.max_new_tokens)
    out["decision"] = decision(out["ewif"])
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{config.describe()}  fill={args.fill}")
    print("\n".join(configuration_lines(out)))
    if out["decision"] == "autoregressive":
        print(
            "on these costs, decode autoregressively: this configuration reaches "
            f"{out['ewif']:.4f}x"
        )
    return 0
