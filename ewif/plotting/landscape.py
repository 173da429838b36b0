"""The EWIF landscape of a cascade over two K entries (a heat map with the optimum marked).

The data is :func:`ewif.search.landscape.landscape_around`'s
:class:`~ewif.search.landscape.Landscape`;
:func:`draw_landscape` draws it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ewif.plotting import style
from ewif.search.landscape import Landscape


def draw_landscape(
    land: Landscape, path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Draw a heat map of ``land.grid`` (EWIF, × autoregressive; computed by
    :func:`ewif.search.landscape.landscape_around`) to ``path`` (PNG/SVG/PDF).

    Axes are the two K entries (token budgets); contour lines and labels make levels
    readable in greyscale; a star marks the grid's maximum and a ring (black, outlined in
    white: visible on every shade) the configuration the landscape was computed around.
    """
    from matplotlib import patheffects

    path = style.output_path(path)
    (r1, j1), (r2, j2) = land.entries
    cfg = land.config
    fig, ax = style.figure(
        title or f"EWIF over two budgets (lenience {cfg.lenience:g})\n{' > '.join(cfg.models)}",
        budget_label(cfg.models, r2, j2),
        budget_label(cfg.models, r1, j1),
    )
    grid = np.ma.masked_invalid(land.grid)
    extent = (land.y[0] - 0.5, land.y[-1] + 0.5, land.x[0] - 0.5, land.x[-1] + 0.5)
    im = ax.imshow(grid, origin="lower", extent=extent, aspect="auto", cmap=style.CMAP)
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label("EWIF (× autoregressive)")
    if np.isfinite(land.grid).sum() > 3:
        levels = np.linspace(np.nanmin(land.grid), np.nanmax(land.grid), 8)[1:-1]
        cs = ax.contour(land.y, land.x, grid, levels=levels, colors="black", linewidths=0.6)
        ax.clabel(cs, fmt="%.2f", fontsize="x-small")
    i, j = np.unravel_index(np.nanargmax(land.grid), land.grid.shape)
    ax.plot(land.y[j], land.x[i], label=f"grid maximum {land.grid[i, j]:.3f}", **style.optimum(2))
    ax.plot(
        cfg.K[r2 - 1, j2 - 1],
        cfg.K[r1 - 1, j1 - 1],
        linestyle="none",
        marker="o",
        markersize=11,
        markerfacecolor="none",
        markeredgecolor="black",
        markeredgewidth=1.6,
        path_effects=[patheffects.withStroke(linewidth=4.0, foreground="white")],
        label=f"the cascade (EWIF {cfg.ewif:.3f})",
    )
    style.integer_ticks(ax.xaxis, ax.yaxis)
    handles, labels = ax.get_legend_handles_labels()  # the map fills the axes: legend below
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize="small")
    return style.save(fig, path)


def budget_label(models, r: int, j: int) -> str:
    """Axis label of K entry ``k_rj`` (maths): the tokens drafter ``j`` drafts per review
    call of model ``r − 1``, by their names, on two lines."""
    return f"$k_{{{r}{j}}}$: tokens of {models[j]}\nper review by {models[r - 1]}"
