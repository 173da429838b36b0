"""Plot data that needs the simulator: what ``csd plot``, ``csd simulate --plot`` and the
notebooks add to the figures of :mod:`ewif.plotting` (the one home of drawing; each figure kind
there is a ``compute_…`` giving its data and a ``draw_…(data, path)`` writing it).

* :func:`simulated_points` — acceptance by draft position from the Monte Carlo
  (:func:`simulate.bernoulli.simulate`), with Wilson intervals;
* :func:`measured_curve` — measured acceptance by position (read by
  :func:`ewif.plotting.measured.read_measured` from a run or a model-set file) with Wilson
  intervals (the one interval used for acceptance curves, :func:`simulate.stats.wilson_interval`);
* :func:`simulation_data` — the two-panel figure of ``csd simulate --plot``.

What needs no simulator lives in ewif: the cascade a plot is about
(:func:`ewif.search.recommendation.choose_cascade`, the one rule), the inputs of the
EWIF-vs-k figure (:func:`ewif.plotting.ewif_vs_k.inputs_of`), the file readers.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.files import results as _results
from ewif.kernel.cascade import Cascade
from ewif.plotting.decay import Points
from ewif.plotting.measured import Measured, read_measured
from ewif.plotting.simulation import SimulationData


def simulated_points(
    cascade: Cascade,
    max_position: int,
    *,
    trials: int = 100_000,
    seed: int | None = 0,
    level: float = 0.999,
    progress: bool = False,
) -> Points:
    """Acceptance by draft position of ``trials`` simulated target steps of ``cascade``
    (:func:`simulate.bernoulli.simulate`), with Wilson intervals at ``level``."""
    from simulate.bernoulli import simulate

    m = validate.count("max_position", max_position, minimum=1)
    trials = validate.count("trials", trials, minimum=2)
    sim = simulate(cascade, trials=trials, seed=seed, progress=progress)
    curve = sim.acceptance_by_position(m, level=level)
    label = (
        f"simulated: {sim.trials:,} target steps (seed {seed}), {level:.1%} Wilson intervals"
        + (" (interrupted)" if sim.interrupted else "")
    )
    return Points(label, curve.p, curve.low, curve.high, sim.trials)


def simulation_data(
    result: Any, cascade: Cascade, *, max_position: int = 12, level: float = 0.999
) -> SimulationData:
    """The data of ``csd simulate --plot``: exact vs simulated acceptance by position (with
    Wilson intervals at ``level``) and tokens per target step (exact pmf vs frequencies)."""
    sim = result.acceptance_by_position(max_position, level)
    return SimulationData(
        trials=result.trials,
        exact_curve=np.asarray(cascade.acceptance_by_position(max_position), dtype=float),
        simulated=Points(f"simulated, Wilson {level:.1%}", sim.p, sim.low, sim.high, result.trials),
        exact_pmf=np.asarray(cascade.tokens_pgf().coefficients, dtype=float),
        frequencies=np.asarray(result.tokens_distribution(), dtype=float),
    )


# ----------------------------------------------------------------------------- measured


def measured_curve(
    source: str | os.PathLike[str] | _results.Results | Measured,
    *,
    method: str | None = None,
    pair: tuple[int, int] | None = None,
    level: float = 0.95,
) -> Points:
    """Measured acceptance by position with Wilson intervals at ``level`` (treating target
    steps as independent), from what :func:`ewif.plotting.measured.read_measured` reads of
    ``source`` (a run, its file, or a model-set file with ``alpha_by_position``; ``method``
    and ``pair`` choose the curve), or from a :class:`~ewif.plotting.measured.Measured`."""
    level = validate.probability("level", level)
    found = (
        source if isinstance(source, Measured) else read_measured(source, method=method, pair=pair)
    )
    return with_wilson(found.label, found.p, found.trials, level)


def with_wilson(label: str, p: np.ndarray, trials: int | None, level: float) -> Points:
    """Points with Wilson intervals at ``level`` from ``trials`` steps each (none: the point)."""
    from simulate.stats import wilson_interval

    if trials:
        ok = np.rint(p * trials).astype(np.int64)
        low, high = wilson_interval(ok, np.full(p.size, trials), level)
        label += f", {level:.0%} Wilson intervals"
    else:
        low, high = p.copy(), p.copy()
        label += " (no step count: no interval)"
    return Points(label, p, np.asarray(low, float), np.asarray(high, float), trials)
