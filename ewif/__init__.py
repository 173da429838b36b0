"""Exact analytic layer of Cascade Speculative Drafting: PGFs, T_α, EWIF, cascades.

Dependencies: numpy for all numerics; sympy (and its mpmath) where exact or symbolic work is
asked for (:mod:`ewif.theory.symbolic`, :func:`best_k` beyond float range); pyyaml to read YAML
model sets; tqdm for progress bars; matplotlib only in :mod:`ewif.plotting`. Never torch.

Sub-packages, each importing only those before it (docs/architecture.md):
:mod:`ewif.base` (checks, limits, arithmetic), :mod:`ewif.theory` (the paper's closed forms),
:mod:`ewif.kernel` (the exact evaluator :class:`~ewif.kernel.cascade.Cascade` on the one
review-call kernel), :mod:`ewif.files` (model-set and results files), :mod:`ewif.search`
(the optimizer and the recommendation), :mod:`ewif.predict` (batch-aware serving,
intervals), then :mod:`ewif.serving`, :mod:`ewif.plotting` and :mod:`ewif.commands`.

The public names below are loaded on first use, so ``import ewif.kernel.cascade`` loads the
kernel alone.
"""

from importlib import import_module
from typing import Any

#: Public name -> the module that defines it.
_HOMES = {
    "Pgf": "ewif.theory.pgf",
    **dict.fromkeys(
        ("T", "best_k", "phi", "review", "sd_ewif", "vertical_c2_threshold", "vertical_ewif"),
        "ewif.theory.theorems",
    ),
    **dict.fromkeys(
        ("HorizontalGradient", "horizontal_ewif", "horizontal_gradient"), "ewif.theory.horizontal"
    ),
    "PassCost": "ewif.kernel.pass_cost",
    "Cascade": "ewif.kernel.cascade",
    **dict.fromkeys(("Tree", "tree_tokens"), "ewif.kernel.tree"),
    "TreeCascade": "ewif.kernel.tree_cascade",
    **dict.fromkeys(("BestTree", "best_tree", "best_trees"), "ewif.search.best_tree"),
    "optimize_trees": "ewif.search.tree_search",
    "Configuration": "ewif.base.configuration",
    **dict.fromkeys(("OptimizeResult", "best_sd", "optimize"), "ewif.search.optimizer"),
    "landscape_around": "ewif.search.landscape",
    "paper_bounds": "ewif.search.space",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ewif' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
