"""Calibration plot: ewif's predicted speedup against the speedup measured by ``csd realrun``.

For every method of a ``csd.results/1`` run (see :mod:`ewif.files.results`) that has a prediction,
the point (x, y) = (``predicted_speedup``, ``speedup``) is drawn: x is the EWIF of the
configuration for the measured α and pass costs (the renewal-reward ratio E[tokens]/E[cost] of the
``Cascade`` docstring), y is ``tokens_per_s / tokens_per_s(AR)`` measured side by side.
A perfect model puts every point on the line y = x. Each point is annotated with its
signed relative error ``predicted / measured − 1``.

The SWI point (``predicted_speedup``, ``swi``) of the same method is drawn too: SWI counts
the passes that really ran and prices each at its size on the measured cost curve, so

* SWI ≈ predicted, measured off the line → the *cost model* (per-pass overhead, c) is off;
* SWI off the line as well → the *acceptance model* (i.i.d. α) is off.

When the run carries prediction intervals (``metadata.prediction_intervals``, the 90 %
bootstrap over measuring prompts of :mod:`ewif.predict.bootstrap`), each prediction is drawn with
its interval as a horizontal bar: a point whose bar does not reach the line y = x is a miss the
measuring prompts' noise does not explain.

Methods with no prediction (transformers' own baselines) are drawn as horizontal reference
lines at their measured speedup. :func:`compute_calibration` gathers the points,
:func:`draw_calibration` draws them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ewif.files import results as _results
from ewif.plotting import style


@dataclass(frozen=True)
class CalibrationPoint:
    """One method of a run: prediction, measurement, SWI and the signed relative error."""

    name: str
    kind: str
    predicted: float | None
    measured: float | None
    swi: float | None
    interval: tuple[float, float] | None = None

    @property
    def error(self) -> float | None:
        """``predicted / measured − 1`` (None if either is unknown or measured is 0)."""
        if self.predicted is None or not self.measured:
            return None
        return self.predicted / self.measured - 1.0


@dataclass(frozen=True)
class CalibrationData:
    """What the calibration figure shows: the run (family, device) and one point per method."""

    family: str
    device: str
    points: list[CalibrationPoint]

    @property
    def summary(self) -> str:
        """``|predicted/measured − 1|: mean …, max … over N method(s)`` (speculative ones)."""
        errors = [
            abs(p.error) for p in self.points if p.error is not None and p.kind != "autoregressive"
        ]
        if not errors:
            return ""
        return (
            f"|predicted/measured − 1|: mean {sum(errors) / len(errors):.1%}, "
            f"max {max(errors):.1%} over {len(errors)} method(s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "methods": [
                {
                    "name": p.name,
                    "kind": p.kind,
                    "predicted": p.predicted,
                    "measured": p.measured,
                    "swi": p.swi,
                    "error": p.error,
                    "interval": None if p.interval is None else list(p.interval),
                }
                for p in self.points
            ]
        }


def compute_calibration(
    results: _results.Results | str | os.PathLike[str],
) -> CalibrationData:
    """The calibration data of a run (a :class:`~ewif.files.results.Results` or a results-file
    path).

    A path is read and validated by :func:`ewif.files.results.load`, so a file of another schema
    raises ``ValueError`` naming the schema found; so does a run in which no method has both
    a prediction and a measured speedup.
    """
    run = _as_results(results)
    intervals = run.metadata.get("prediction_intervals") or {}
    points = [
        CalibrationPoint(
            m.name,
            m.kind,
            m.predicted_speedup,
            m.speedup,
            m.swi,
            (intervals[m.name]["low"], intervals[m.name]["high"]) if m.name in intervals else None,
        )
        for m in run.methods
    ]
    if not any(p.predicted is not None and p.measured is not None for p in points):
        raise ValueError(
            "results: no method has both predicted_speedup and speedup, nothing to calibrate"
        )
    return CalibrationData(run.family, run.device, points)


def draw_calibration(
    data: CalibrationData, path: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Draw predicted vs measured speedup (and SWI) of a run to ``path`` (PNG/SVG/PDF): the
    reference (y = x and a ±10 % band), methods without a prediction as horizontal lines,
    each measured point with its prediction interval, the SWI points, then each point's
    label placed beside it where it hides no other label, point or the legend."""
    path = style.output_path(path)
    paired = [p for p in data.points if p.predicted is not None and p.measured is not None]
    fig, ax = style.figure(
        title or f"Predicted vs measured speedup\n{data.family} on {data.device}\n{data.summary}",
        "predicted speedup: EWIF (× autoregressive)",
        "measured speedup (× autoregressive tokens/s)",
    )
    low, high = _limits(data.points)
    _draw_reference(ax, low, high)
    _draw_unpredicted(ax, [p for p in data.points if p.predicted is None and p.measured])
    _draw_measured(ax, paired)
    _draw_swi(ax, [p for p in paired if p.swi is not None])
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    style.finish(ax, loc="lower right")
    label_points(ax, [(p.predicted, p.measured, _label(p)) for p in paired])
    return style.save(fig, path)


def _limits(points: list[CalibrationPoint]) -> tuple[float, float]:
    """The square range of both axes: from 0 (or below) to 12 % above every value shown."""
    values = [
        v
        for p in points
        for v in (p.predicted, p.measured, p.swi, *(p.interval or ()))
        if v is not None
    ]
    return min(0.0, min(values)), max(values) * 1.12


def _draw_reference(ax: Any, low: float, high: float) -> None:
    """The perfect prediction y = x and the band of errors within 10 %."""
    ax.fill_between(
        [low, high],
        [low / 1.1, high / 1.1],
        [low / 0.9, high / 0.9],
        color="0.88",
        linewidth=0.0,
        label="|predicted/measured − 1| ≤ 10 %",
    )
    ax.plot([low, high], [low, high], color="0.35", linestyle="--", linewidth=1.0,
            label="y = x (perfect prediction)")  # fmt: skip


def _draw_unpredicted(ax: Any, points: list[CalibrationPoint]) -> None:
    """Methods ewif does not predict (transformers' own), as lines at their measured speedup."""
    for i, p in enumerate(points):
        ax.axhline(
            p.measured,
            color=style.COLOURS[(i + 3) % len(style.COLOURS)],
            linestyle=style.LINESTYLES[(i + 2) % len(style.LINESTYLES)],
            linewidth=1.0,
            label=f"{p.name} (measured, no prediction)",
        )


def _draw_measured(ax: Any, points: list[CalibrationPoint]) -> None:
    """Each measured speedup at its prediction, with the prediction's interval as a bar."""
    ax.plot(*_against_predicted(points, "measured"), label="measured (wall-clock)", **_no_caps(0))
    with_interval = [p for p in points if p.interval is not None]
    if with_interval:
        ax.errorbar(
            *_against_predicted(with_interval, "measured"),
            xerr=[
                [p.predicted - p.interval[0] for p in with_interval],
                [p.interval[1] - p.predicted for p in with_interval],
            ],
            fmt="none",
            ecolor=style.COLOURS[0],
            elinewidth=1.2,
            capsize=3,
            label="90 % prediction interval",
        )


def _draw_swi(ax: Any, points: list[CalibrationPoint]) -> None:
    """Each SWI point, joined to its measured point by a dotted line."""
    if not points:
        return
    ax.plot(
        *_against_predicted(points, "swi"),
        label="SWI (counted passes priced at their size m)",
        **_no_caps(1),
    )
    for p in points:
        ax.plot([p.predicted] * 2, [p.measured, p.swi], color="0.55", linestyle=":", linewidth=0.9)


def _label(p: CalibrationPoint) -> str:
    """A point's label: its method, and the signed error of its prediction."""
    return p.name if p.kind == "autoregressive" else f"{p.name}\n{p.error:+.1%}"


#: Offsets (points) tried for a label, nearest first: beside, then further with a leader.
_RADII = (7.0, 16.0, 28.0, 42.0)
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (-1, 0), (0, 1), (0, -1))


def label_points(ax: Any, points: list[tuple[float, float, str]]) -> None:
    """Annotate each ``(x, y, text)`` beside its point: the nearest offset (``_RADII`` ×
    ``_DIRECTIONS``) whose box stays inside the axes and overlaps no label placed before,
    no plotted marker and no legend; further ones draw a thin leader line to the point."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    legend = ax.get_legend()
    taken = [legend.get_window_extent(renderer)] if legend is not None else []
    markers = _marker_boxes(ax)
    for x, y, text in points:
        note = ax.annotate(text, (x, y), (0, 0), textcoords="offset points", fontsize="x-small")
        for radius, (dx, dy) in ((r, d) for r in _RADII for d in _DIRECTIONS):
            _place(note, radius, dx, dy)
            box = note.get_window_extent(renderer)
            inside = ax.bbox.containsx(box.x0) and ax.bbox.containsx(box.x1)
            inside = inside and ax.bbox.containsy(box.y0) and ax.bbox.containsy(box.y1)
            if inside and not any(box.overlaps(b) for b in taken + markers):
                break
        if radius > _RADII[0]:  # far from its point: a leader line shows whose label it is
            note.remove()
            note = ax.annotate(
                text, (x, y), (0, 0), textcoords="offset points", fontsize="x-small",
                arrowprops={"arrowstyle": "-", "color": "0.45", "linewidth": 0.6},
            )  # fmt: skip
            _place(note, radius, dx, dy)
        taken.append(note.get_window_extent(renderer))


def _place(note: Any, radius: float, dx: int, dy: int) -> None:
    """Put ``note`` ``radius`` points from its point in direction ``(dx, dy)``."""
    note.set_position((radius * dx, radius * dy))
    note.set_ha({1: "left", -1: "right", 0: "center"}[dx])
    note.set_va({1: "bottom", -1: "top", 0: "center"}[dy])


def _marker_boxes(ax: Any, half: float = 5.0) -> list[Any]:
    """A small display box around every marker drawn on ``ax`` (lines with no line style)."""
    from matplotlib.transforms import Bbox

    boxes = []
    for line in ax.get_lines():
        if line.get_marker() in (None, "None", "none", ""):
            continue
        for px, py in line.get_transform().transform(line.get_xydata()):
            boxes.append(Bbox([[px - half, py - half], [px + half, py + half]]))
    return boxes


def _as_results(results: _results.Results | str | os.PathLike[str]) -> _results.Results:
    if isinstance(results, _results.Results):
        return results
    if isinstance(results, (str, os.PathLike)):
        return _results.load(Path(results))
    raise TypeError(
        f"results must be an ewif.files.results.Results or a path to a csd.results/1 file, "
        f"got {type(results).__name__}"
    )


def _against_predicted(
    points: list[CalibrationPoint], attribute: str
) -> tuple[list[float], list[float]]:
    """``(x, y)`` of ``points``: each one's predicted speed-up, and its ``attribute``."""
    return [p.predicted for p in points], [getattr(p, attribute) for p in points]


def _no_caps(i: int) -> dict[str, Any]:
    """``style.points`` for ``ax.plot`` (which has no error-bar keywords)."""
    kw = style.points(i)
    kw.pop("capsize")
    kw.pop("elinewidth")
    return kw
