"""Figure of a simulation against the exact theory (used by ``csd simulate --plot``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from simulate.bernoulli import SimulationResult


def plot_simulation(
    result: SimulationResult,
    cascade: Any,
    path: str | os.PathLike[str],
    *,
    max_position: int = 12,
    level: float = 0.999,
    title: str | None = None,
) -> Path:
    """Two panels written to ``path`` (PNG/SVG/PDF by suffix):

    (a) P(draft position i exists and is accepted) — exact ``cascade.acceptance_by_position``
        as a line, simulated points with Wilson intervals at ``level``;
    (b) the distribution of tokens per target step — simulated frequencies as bars, exact
        ``cascade.tokens_pgf()`` probabilities as markers.
    """
    from ewif.plotting import style

    path = style.output_path(path)
    exact_curve = np.asarray(cascade.acceptance_by_position(max_position), dtype=float)
    sim = result.acceptance_by_position(max_position, level)
    pmf = np.asarray(cascade.tokens_pgf().coefficients, dtype=float)
    freq = result.tokens_distribution()
    width = max(pmf.size, freq.size)
    pmf = np.pad(pmf, (0, width - pmf.size))
    freq = np.pad(freq, (0, width - freq.size))
    shown = np.flatnonzero((pmf >= 1e-4) | (freq > 0))
    t = np.arange(shown.min(), shown.max() + 1) if shown.size else np.arange(1, 2)

    fig, (ax_a, ax_b) = style.figure(
        title or f"Monte Carlo ({result.trials:,} target steps) vs exact theory",
        "draft position i (tokens)",
        "probability",
        size=(10.0, 4.2),
        ncols=2,
    )
    i = np.arange(1, max_position + 1)
    ax_a.set_title("(a) P(position i exists and is accepted)", fontsize="medium")
    ax_a.plot(i, exact_curve, label="exact (ewif.Cascade)", **style.line(0))
    ax_a.errorbar(
        i, sim.p, yerr=[sim.p - sim.low, sim.high - sim.p],
        label=f"simulated, Wilson {level:.1%}", **style.points(1),
    )
    ax_a.set_ylim(0, 1.02)
    ax_a.set_xlim(0.5, max_position + 0.5)
    style.finish(ax_a)

    ax_b.set_title("(b) tokens per target step", fontsize="medium")
    ax_b.set_xlabel("tokens produced by one target step")
    ax_b.bar(t, freq[t], width=0.7, label="simulated frequency", **style.bar(5))
    ax_b.errorbar(t, pmf[t], label="exact tokens_pgf()", **style.points(0))
    style.finish(ax_b)
    return style.save(fig, path)
