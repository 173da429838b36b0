"""A Monte Carlo run against the exact theory (the figure of ``csd simulate --plot``).

The data (:class:`SimulationData`) is computed by :func:`simulate.plotting.simulation_data`
from a simulation and its :class:`~ewif.kernel.cascade.Cascade`; :func:`draw_simulation` draws it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ewif.plotting import style
from ewif.plotting.decay import Points


@dataclass(frozen=True)
class SimulationData:
    """Exact vs simulated: acceptance by draft position ``i = 1..len(exact_curve)`` and the
    distribution of tokens per target step (``exact_pmf[t]`` vs ``frequencies[t]``)."""

    trials: int
    exact_curve: np.ndarray
    simulated: Points
    exact_pmf: np.ndarray
    frequencies: np.ndarray


def draw_simulation(
    data: SimulationData, path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Two panels written to ``path`` (PNG/SVG/PDF by suffix): (a) P(draft position i exists
    and is accepted), exact line and simulated points with their intervals; (b) tokens per
    target step, simulated frequencies as bars and exact probabilities as markers."""
    path = style.output_path(path)
    width = max(data.exact_pmf.size, data.frequencies.size)
    pmf = np.pad(data.exact_pmf, (0, width - data.exact_pmf.size))
    freq = np.pad(data.frequencies, (0, width - data.frequencies.size))
    shown = np.flatnonzero((pmf >= 1e-4) | (freq > 0))
    t = np.arange(shown.min(), shown.max() + 1) if shown.size else np.arange(1, 2)
    fig, (ax_a, ax_b) = style.figure(
        title or f"Monte Carlo ({data.trials:,} target steps) vs exact theory",
        "draft position i (tokens)",
        "probability",
        size=(10.0, 4.2),
        ncols=2,
    )
    i = np.arange(1, data.exact_curve.size + 1)
    sim = data.simulated
    ax_a.set_title("(a) P(position i exists and is accepted)", fontsize="medium")
    ax_a.plot(i, data.exact_curve, label="exact theory", **style.line(0))
    ax_a.errorbar(
        i, sim.p, yerr=[sim.p - sim.low, sim.high - sim.p], label=sim.label, **style.points(1)
    )
    ax_a.set_ylim(0, 1.02)
    ax_a.set_xlim(0.5, i.size + 0.5)
    style.integer_ticks(ax_a.xaxis)
    style.finish(ax_a)
    ax_b.set_title("(b) tokens per target step", fontsize="medium")
    ax_b.set_xlabel("tokens produced by one target step")
    ax_b.bar(t, freq[t], width=0.7, label="simulated frequency", **style.bar(5))
    ax_b.errorbar(t, pmf[t], label="exact probability", **style.points(0))
    style.integer_ticks(ax_b.xaxis)
    style.finish(ax_b)
    return style.save(fig, path)
