"""Exact analytic layer of Cascade Speculative Drafting: PGFs, T_α, EWIF, cascades.

numpy/scipy/sympy only; never imports torch.
"""

from ewif.pgf import Pgf

__all__ = ["Pgf"]
