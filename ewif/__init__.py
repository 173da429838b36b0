"""Exact analytic layer of Cascade Speculative Drafting: PGFs, T_α, EWIF, cascades.

Dependencies: numpy for all numerics; sympy (and its mpmath) where exact or symbolic work is
asked for (:mod:`ewif.symbolic`, :func:`best_k` beyond float range); pyyaml to read YAML
model sets; tqdm for progress bars; matplotlib only in :mod:`ewif.plotting`. Never torch.

Where things are: :mod:`ewif.cascade` (exact evaluation, on the one review-call kernel
:mod:`ewif.review_call`, priced by :mod:`ewif.pass_cost`), :mod:`ewif.space` and
:mod:`ewif.search` (the optimizer; :mod:`ewif.envelope` its Dinkelbach step,
:mod:`ewif.landscape` two entries varied), :mod:`ewif.recommendation` (the one rule every
command uses), :mod:`ewif.io` (model-set files), :mod:`ewif.theorems` and
:mod:`ewif.horizontal` (the paper's closed forms).
"""

from ewif.cascade import Cascade
from ewif.horizontal import HorizontalGradient, horizontal_ewif, horizontal_gradient
from ewif.landscape import landscape_around
from ewif.pass_cost import PassCost
from ewif.pgf import Pgf
from ewif.search import Configuration, OptimizeResult, best_sd, optimize
from ewif.space import paper_bounds
from ewif.theorems import T, best_k, phi, review, sd_ewif, vertical_c2_threshold, vertical_ewif

__all__ = ["Pgf"]
__all__ += ["T", "best_k", "phi", "review", "sd_ewif", "vertical_c2_threshold", "vertical_ewif"]
__all__ += ["HorizontalGradient", "horizontal_ewif", "horizontal_gradient"]
__all__ += ["Cascade", "Configuration", "OptimizeResult", "best_sd", "landscape_around", "optimize"]
__all__ += ["PassCost", "paper_bounds"]
