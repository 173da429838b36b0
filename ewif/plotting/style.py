"""The one figure style shared by every plot of the project.

Every figure is built here so that all of them look alike and stay readable when printed
in greyscale: each series differs by line style *and* marker *and* a colour of distinct
lightness (Okabe–Ito, colour-blind safe), heat maps use ``cividis`` (lightness increases
monotonically), bars carry hatching. Figures are plain :class:`matplotlib.figure.Figure`
objects drawn on an Agg canvas — never ``pyplot`` — so they render headless, hold no
global state and work the same in a script, a test or a notebook.

Typical use inside a plotting function::

    path = style.output_path(path)            # fail fast, before any computation
    fig, ax = style.figure("Title", "draft length k (tokens)", "EWIF (× autoregressive)")
    ax.plot(x, y, label="SD", **style.line(0))
    ax.errorbar(x, y, yerr, label="simulated", **style.points(1))
    style.finish(ax)
    style.save(fig, path)

Size contract: :func:`save` writes exactly ``width × height`` inches at ``dpi`` — no tight
bounding box — so a PNG written with the defaults is :data:`DEFAULT_SIZE` × :data:`DPI`
= 960 × 630 pixels (tests rely on it); only a legend that finds no free place inside the
axes makes a one-axes figure taller by its own height (:func:`finish`).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

SUFFIXES = (".png", ".svg", ".pdf")
DEFAULT_SIZE = (6.4, 4.2)  # inches
TITLE_WIDTH = 64  # characters of a title line that fit one axes at the default size
DPI = 150
CMAP = "cividis"

# Okabe–Ito colours ordered so neighbours differ in lightness; black first.
COLOURS = ("#000000", "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo")


def output_path(path: str | os.PathLike[str]) -> Path:
    """Check that a figure can be written to ``path``; return it as a :class:`Path`.

    The suffix chooses the format (``.png``, ``.svg`` or ``.pdf``, any case); the parent
    folder must exist and be writable and ``path`` must not be a folder. Raises
    ``ValueError`` naming the path and what is allowed.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or os.PathLike), got {path!r}")
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise ValueError(
            f"cannot write figure {str(p)!r}: "
            + (f"unknown suffix {p.suffix!r}" if p.suffix else "no suffix")
            + f"; use one of {', '.join(SUFFIXES)}"
        )
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ValueError(f"cannot write figure {str(p)!r}: it is a folder")
    if not parent.is_dir():
        raise ValueError(f"cannot write figure {str(p)!r}: folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"cannot write figure {str(p)!r}: permission denied")
    return p


def figure(
    title: str,
    xlabel: str,
    ylabel: str,
    *,
    size: tuple[float, float] = DEFAULT_SIZE,
    ncols: int = 1,
) -> tuple[Any, Any]:
    """A new headless figure with a title and labelled axes; returns ``(fig, ax)``.

    Labels should carry units, e.g. ``"draft position i (tokens)"``. With ``ncols > 1``,
    ``ax`` is a tuple of axes side by side sharing the x label; ``title`` is the figure's
    title and each axes gets the y label (set per-axes titles yourself).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = tuple(fig.subplots(1, ncols, squeeze=False)[0])
    for ax in axes:
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, color="0.85", linewidth=0.6)
        ax.set_axisbelow(True)
    title = wrap_title(title, TITLE_WIDTH * ncols)
    if ncols == 1:
        axes[0].set_title(title)
        return fig, axes[0]
    fig.suptitle(title)
    return fig, axes


def wrap_title(title: str, width: int) -> str:
    """Each line of ``title`` wrapped at ``width`` characters, so no title is cut off."""
    return "\n".join(
        "\n".join(textwrap.wrap(line, width)) if line else "" for line in title.split("\n")
    )


def line(i: int) -> dict[str, Any]:
    """Keyword arguments for ``ax.plot`` of the ``i``-th series (line + sparse markers)."""
    j = i % len(COLOURS)
    return {
        "color": COLOURS[j],
        "linestyle": LINESTYLES[j],
        "marker": MARKERS[j],
        "markersize": 4.5,
        "linewidth": 1.6,
        "markerfacecolor": "white" if j % 2 else COLOURS[j],
    }


def points(i: int) -> dict[str, Any]:
    """Keyword arguments for ``ax.errorbar``/``ax.plot`` of measured or simulated points."""
    j = i % len(COLOURS)
    return {
        "color": COLOURS[j],
        "linestyle": "none",
        "marker": MARKERS[j],
        "markersize": 6,
        "markerfacecolor": "white" if j % 2 else COLOURS[j],
        "markeredgewidth": 1.2,
        "capsize": 3,
        "elinewidth": 1.0,
    }


def optimum(i: int) -> dict[str, Any]:
    """Keyword arguments for ``ax.plot`` of a single highlighted optimum (a large star)."""
    j = i % len(COLOURS)
    return {
        "color": COLOURS[j],
        "linestyle": "none",
        "marker": "*",
        "markersize": 14,
        "markeredgecolor": "black",
        "markeredgewidth": 0.8,
        "zorder": 5,
    }


def bar(i: int) -> dict[str, Any]:
    """Keyword arguments for ``ax.bar`` of the ``i``-th group: fill colour plus hatching."""
    j = i % len(COLOURS)
    return {"color": COLOURS[j], "hatch": HATCHES[j], "edgecolor": "black", "linewidth": 0.6}


#: Where :func:`finish` tries a legend inside the axes, after the plot's own choice.
LEGEND_PLACES = (
    "upper left",
    "upper right",
    "lower right",
    "lower left",
    "center left",
    "center right",
    "upper center",
    "lower center",
)


def finish(ax: Any, *, legend: bool = True, loc: str = "best") -> None:
    """Final touches on one axes: a framed legend of the labelled artists, if any, placed
    where it covers nothing plotted (:func:`covers_data`) — ``loc`` first, then each of
    :data:`LEGEND_PLACES` inside the axes, else outside: below the axes in two columns
    where they fit (one axes; the figure grows by the legend's height), on the right of its
    axes (several; the constrained layout makes room)."""
    if not (legend and ax.get_legend_handles_labels()[0]):
        return
    renderer = ax.figure.canvas.get_renderer()
    ax.figure.draw_without_rendering()
    for place in (loc, *(p for p in LEGEND_PLACES if p != loc)):
        box = ax.legend(loc=place, frameon=True, framealpha=0.9, fontsize="small")
        if not covers_data(ax, box.get_window_extent(renderer)):
            return
    ax.get_legend().remove()
    handles, labels = ax.get_legend_handles_labels()
    if len(ax.figure.axes) == 1:
        fig = ax.figure
        for ncols in (2, 1):  # two columns where they fit the figure's width
            box = fig.legend(
                handles, labels, loc="outside lower center", ncols=ncols, fontsize="small"
            )
            extent = box.get_window_extent(renderer)
            if extent.width <= fig.bbox.width or ncols == 1:
                break
            box.remove()
        width, height = fig.get_size_inches()
        fig.set_size_inches(width, height + extent.height / fig.dpi)  # the axes keep their room
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")


def covers_data(ax: Any, box: Any, samples: int = 24) -> bool:
    """Whether the display-space ``box`` hides anything plotted on ``ax``: a marker or a
    point of a line (lines sampled ``samples`` times per segment, so a box cannot sit
    between two vertices), an error bar, band or bar (their filled outline), an image."""
    import numpy as np

    for line in ax.get_lines():
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if line.get_linestyle() not in ("None", "none", "", " ") and len(xy) > 1:
            t = np.linspace(0.0, 1.0, samples, endpoint=False)[:, None, None]
            xy = np.concatenate([(xy[:-1] + t * (xy[1:] - xy[:-1])).reshape(-1, 2), xy[-1:]])
        if box.count_contains(xy):
            return True
    shapes = [(p, c.get_transform()) for c in ax.collections for p in c.get_paths()]
    shapes += [(p.get_path(), p.get_transform()) for p in ax.patches]
    if any(path.transformed(tr).intersects_bbox(box, filled=True) for path, tr in shapes):
        return True
    renderer = ax.figure.canvas.get_renderer()
    return any(im.get_window_extent(renderer).overlaps(box) for im in ax.images)


def integer_ticks(*axes: Any) -> None:
    """Ticks at integers only on each given axis (``ax.xaxis``, ``ax.yaxis``): positions,
    budgets and token counts have no 2.5."""
    from matplotlib.ticker import MaxNLocator

    for axis in axes:
        axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))


def fit_texts(fig: Any) -> None:
    """Re-wrap every title and axis label (the figure's title, each axes' title and labels,
    colour bars included) that sticks out of the canvas, narrower until it fits: the
    constrained layout makes room for what it is given, but cannot shorten a line."""
    import textwrap

    renderer = fig.canvas.get_renderer()
    texts = [t for ax in fig.axes for t in (ax.title, ax.xaxis.label, ax.yaxis.label)]
    if fig._suptitle is not None:
        texts.append(fig._suptitle)
    for text in texts:
        if not text.get_text().strip():
            continue
        width = max(len(line) for line in text.get_text().split("\n"))
        while width > 12:
            fig.draw_without_rendering()
            box, page = text.get_window_extent(renderer), fig.bbox
            if box.x0 >= page.x0 and box.x1 <= page.x1 and box.y0 >= page.y0 and box.y1 <= page.y1:
                break
            width -= 4
            keep = [
                textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                for line in text.get_text().split("\n")
            ]
            text.set_text("\n".join(keep))


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` to ``path`` in the format its suffix names; returns the path. Titles
    and labels are fitted to the canvas first (:func:`fit_texts`).

    Unwritable paths and unknown suffixes raise ``ValueError`` (see :func:`output_path`).
    """
    p = output_path(path)
    fit_texts(fig)
    try:
        fig.savefig(p, format=p.suffix.lower().lstrip("."), dpi=DPI)
    except OSError as exc:
        raise ValueError(f"cannot write figure {str(p)!r}: {exc.strerror or exc}") from None
    return p
