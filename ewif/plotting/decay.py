"""Acceptance by draft position (the paper's Figure 2): i.i.d. α^i versus a cascade's curve."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ewif import validate
from ewif.plotting import style


def plot_decay(
    path: str | os.PathLike[str],
    cascade_curve: Sequence[float] | np.ndarray,
    alpha: float | None = None,
    *,
    simulated: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    measured: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    label: str = "cascade (exact)",
    title: str = "Acceptance by draft position",
) -> Path:
    """Plot P(position i exists and is accepted) for ``i = 1..len(cascade_curve)``.

    ``cascade_curve`` is e.g. :meth:`ewif.cascade.Cascade.acceptance_by_position`;
    ``alpha`` adds the i.i.d. prediction ``α^i``; ``simulated`` / ``measured`` are optional
    ``(estimate, lower, upper)`` arrays over the same positions (e.g. Wilson intervals),
    drawn as points with error bars. Writes ``path`` (PNG/SVG/PDF by suffix).
    """
    path = style.output_path(path)
    curve = validate.probabilities("cascade_curve", cascade_curve)
    if curve.ndim != 1 or curve.size == 0:
        raise ValueError(f"cascade_curve must be a non-empty 1-D array, got shape {curve.shape}")
    i = np.arange(1, curve.size + 1)
    fig, ax = style.figure(title, "draft position i (tokens)", "P(position i accepted)")
    ax.plot(i, curve, label=label, **style.line(0))
    if alpha is not None:
        a = validate.probability("alpha", alpha)
        ax.plot(i, a**i, label=f"i.i.d. α^i, α = {a:.3g}", **style.line(1))
    for k, (name, pts) in enumerate((("simulated", simulated), ("measured", measured))):
        if pts is None:
            continue
        est, lo, hi = (np.asarray(p, dtype=float) for p in pts)
        if not (est.shape == lo.shape == hi.shape == curve.shape):
            raise ValueError(
                f"{name} arrays must each have shape {curve.shape} (one per position)"
            )
        ax.errorbar(i, est, yerr=[est - lo, hi - est], label=f"{name} (interval)",
                    **style.points(k + 2))
    ax.set_ylim(0, 1.02)
    ax.set_xlim(0.5, curve.size + 0.5)
    style.finish(ax)
    return style.save(fig, path)
