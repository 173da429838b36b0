"""Acceptance by draft position (the paper's Figure 2): a cascade's exact curve, i.i.d. α^i,
and optional simulated or measured points with intervals.

:func:`compute_decay` gathers what the figure shows (the exact curve from ewif; simulated
and measured points are computed where they belong — :func:`simulate.plotting.simulated_points`,
:func:`simulate.plotting.measured_curve` — and passed in, each with a Wilson interval);
:func:`draw_decay` draws it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ewif.base import validate
from ewif.kernel.cascade import Cascade
from ewif.plotting import style

MAX_POSITIONS = 20


@dataclass(frozen=True)
class Points:
    """Estimated acceptance by position ``p[i−1]`` (position ``i``) with an interval
    ``[low, high]`` (Wilson, at some level) and where it comes from; ``trials`` is the number
    of target steps behind each point (None when unknown: the interval is the point)."""

    label: str
    p: np.ndarray
    low: np.ndarray
    high: np.ndarray
    trials: int | None = None

    def fitted(self, m: int) -> Points:
        """The same points cut or NaN-padded to ``m`` positions."""

        def fit(a: np.ndarray) -> np.ndarray:
            out = np.full(m, np.nan)
            out[: min(m, a.size)] = a[:m]
            return out

        return Points(self.label, fit(self.p), fit(self.low), fit(self.high), self.trials)

    def to_dict(self) -> dict[str, Any]:
        def listed(a: np.ndarray) -> list[float | None]:
            return [None if np.isnan(v) else float(v) for v in a]

        return {
            "label": self.label,
            "trials": self.trials,
            "p": listed(self.p),
            "low": listed(self.low),
            "high": listed(self.high),
        }


@dataclass(frozen=True)
class DecayData:
    """What the decay figure shows: the exact curve ``P(position i exists and is accepted)``
    for ``i = 1..len(exact)``, the i.i.d. ``α`` and optional simulated/measured points."""

    cascade: str
    exact: np.ndarray
    alpha: float
    simulated: Points | None = None
    measured: Points | None = None
    models: tuple[str, ...] = ()
    K: tuple[tuple[int, ...], ...] = ()

    @property
    def positions(self) -> np.ndarray:
        return np.arange(1, self.exact.size + 1)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cascade": self.cascade,
            "models": list(self.models),
            "K": [list(row) for row in self.K],
            "alpha_iid": self.alpha,
            "positions": self.positions.tolist(),
            "exact": self.exact.tolist(),
        }
        for name in ("simulated", "measured"):
            pts = getattr(self, name)
            if pts is not None:
                out[name] = pts.to_dict()
        return out


def compute_decay(
    cascade: Cascade,
    *,
    alpha: float | None = None,
    max_position: int | None = None,
    simulated: Points | None = None,
    measured: Points | None = None,
) -> DecayData:
    """The decay figure's data for ``cascade``: its exact curve
    (:meth:`~ewif.kernel.cascade.Cascade.acceptance_by_position`) over ``max_position`` positions
    (default: the measured points' length, else the longest possible draft, at most
    :data:`MAX_POSITIONS`), the i.i.d. ``α`` (default: the target's acceptance of the first
    drafter it reviews) and the given points fitted to those positions."""
    first = int(np.flatnonzero(cascade.K[0])[0]) + 1
    alpha = (
        float(cascade.alpha[0, first]) if alpha is None else validate.probability("alpha", alpha)
    )
    if max_position is None:
        longest = max(1, int(cascade.tokens_pgf().max_value) - 1)
        max_position = measured.p.size if measured is not None else min(longest, MAX_POSITIONS)
    m = validate.count("max_position", max_position, minimum=1)
    names = " > ".join(cascade.names) if cascade.names else f"target + {cascade.n} drafter(s)"
    return DecayData(
        f"{names}, K={cascade.K.tolist()}",
        cascade.acceptance_by_position(m),
        alpha,
        None if simulated is None else simulated.fitted(m),
        None if measured is None else measured.fitted(m),
        tuple(cascade.names or ()),
        tuple(tuple(int(v) for v in row) for row in cascade.K),
    )


def draw_decay(data: DecayData, path: str | os.PathLike[str], *, title: str | None = None) -> Path:
    """Draw ``data`` to ``path`` (PNG/SVG/PDF by suffix): the exact curve, ``α^i`` and the
    points with their intervals as error bars."""
    path = style.output_path(path)
    i = data.positions
    fig, ax = style.figure(
        title or f"Acceptance by draft position\n{_title_cascade(data)}",
        "draft position $i$ (tokens)",
        "P(position $i$ accepted)",
    )
    ax.plot(i, data.exact, label="the cascade, exact", **style.line(0))
    ax.plot(
        i,
        data.alpha**i,
        label=rf"independent acceptance $\alpha^i$, $\alpha$ = {data.alpha:.3g}",
        **style.line(1),
    )
    for k, pts in enumerate((data.simulated, data.measured)):
        if pts is None:
            continue
        ax.errorbar(
            i,
            pts.p,
            yerr=[pts.p - pts.low, pts.high - pts.p],
            label=pts.label,
            **style.points(k + 2),
        )
    ax.set_ylim(0, 1.02)
    ax.set_xlim(0.5, i.size + 0.5)
    style.integer_ticks(ax.xaxis)
    style.finish(ax)
    return style.save(fig, path)


def _title_cascade(data: DecayData) -> str:
    """The cascade on two lines, its K written without spaces (a title wraps at spaces, so
    the matrix stays whole)."""
    if not data.models:
        return data.cascade
    K = "[" + ",".join("[" + ",".join(map(str, row)) + "]" for row in data.K) + "]"
    return f"{' > '.join(data.models)}\nK = {K}"
