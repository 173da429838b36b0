"""Exact analytic layer of Cascade Speculative Drafting: PGFs, T_α, EWIF, cascades.

numpy/scipy/sympy only; never imports torch.
"""

from ewif.cascade import Cascade
from ewif.horizontal import HorizontalGradient, horizontal_ewif, horizontal_gradient
from ewif.optimize import Configuration, OptimizeResult, best_sd, landscape, optimize, paper_bounds
from ewif.pass_cost import PassCost
from ewif.pgf import Pgf
from ewif.theorems import T, best_k, phi, review, sd_ewif, vertical_c2_threshold, vertical_ewif

__all__ = ["Pgf"]
__all__ += ["T", "best_k", "phi", "review", "sd_ewif", "vertical_c2_threshold", "vertical_ewif"]
__all__ += ["HorizontalGradient", "horizontal_ewif", "horizontal_gradient"]
__all__ += ["Cascade", "Configuration", "OptimizeResult", "best_sd", "landscape", "optimize"]
__all__ += ["PassCost", "paper_bounds"]
