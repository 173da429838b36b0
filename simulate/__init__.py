"""Monte Carlo witnesses of the exact theory in ``ewif`` (they share only its config types)."""

from simulate.bernoulli import simulate
from simulate.compare import Comparison, compare_with_exact
from simulate.correlated import (
    MarkovAcceptance,
    PositionAcceptance,
    correlation_report,
    simulate_markov,
)
from simulate.estimates import SimulationResult
from simulate.special import simulate_horizontal, simulate_sd, simulate_vertical

__all__ = ["Comparison", "SimulationResult", "compare_with_exact", "simulate"]
__all__ += ["MarkovAcceptance", "PositionAcceptance", "correlation_report", "simulate_markov"]
__all__ += ["simulate_horizontal", "simulate_sd", "simulate_vertical"]
