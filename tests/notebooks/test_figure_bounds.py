"""Every figure kind, rendered as the commands draw it, keeps all its text on the canvas:
each title, label, tick label, legend and annotation lies inside the figure (matplotlib's
tight bounding box against the figure's), and no two labels of points overlap."""

from __future__ import annotations

import json

import pytest

from ewif.cli import main
from tests.notebooks.test_plots import results_dict

SHIPPED = "realrun/data/cpu_results_qwen.json"


def _figures(monkeypatch) -> list:
    from ewif.plotting import style

    drawn, save = [], style.save
    monkeypatch.setattr(style, "save", lambda fig, path: (drawn.append(fig), save(fig, path))[1])
    return drawn


def outside(fig) -> str:
    """What of ``fig`` leaves its canvas: the figure's tight bounding box (every drawn
    artist, tick labels included) against the figure's own box, 1 px of slack; the texts
    (other than tick labels) that stick out are named. Empty when all is inside."""
    from matplotlib.axis import Tick
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()
    tight = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
    page, slack = fig.bbox, 1.0
    if (
        tight.x0 >= page.x0 - slack
        and tight.y0 >= page.y0 - slack
        and tight.x1 <= page.x1 + slack
        and tight.y1 <= page.y1 + slack
    ):
        return ""
    named = []
    for text in fig.findobj(lambda a: isinstance(a, Text) and not isinstance(a.axes, Tick)):
        if not text.get_visible() or not text.get_text().strip() or isinstance(
            text.get_parent() if hasattr(text, "get_parent") else None, Tick
        ):
            continue
        box = text.get_window_extent(renderer)
        if not (page.x0 - slack <= box.x0 and box.x1 <= page.x1 + slack) or not (
            page.y0 - slack <= box.y0 and box.y1 <= page.y1 + slack
        ):
            named.append(text.get_text())
    return f"tight box {tight} leaves the figure {page}; texts out: {named}"


def _overlapping_annotations(fig) -> list[tuple[str, str]]:
    from matplotlib.text import Annotation

    renderer = fig.canvas.get_renderer()
    notes = [a for ax in fig.axes for a in ax.texts if isinstance(a, Annotation)]
    boxes = [(a.get_text(), a.get_window_extent(renderer)) for a in notes]
    return [
        (t1, t2)
        for i, (t1, b1) in enumerate(boxes)
        for t2, b2 in boxes[i + 1 :]
        if b1.overlaps(b2)
    ]


@pytest.fixture
def run_file(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(results_dict()))
    return path


KINDS = {
    "decay": ["plot", "decay", "--trials", "3000"],
    "decay-measured": ["plot", "decay", "--trials", "3000", "--measured", SHIPPED],
    "ewif-vs-k": ["plot", "ewif-vs-k", "--alpha", "0.8", "--cost", "0.05", "--alpha2", "0.5",
                  "--cost2", "0.002", "--alpha12", "0.7"],
    "ewif-vs-k-preset": ["plot", "ewif-vs-k", "--preset", "t5-cnndm-ms"],
    "landscape": ["plot", "landscape", "--k-max", "12"],
    "calibration": ["plot", "calibration", "RUN"],
    "calibration-shipped": ["plot", "calibration", SHIPPED],
    "simulation": ["simulate", "--preset", "t5-cnndm-ms", "--trials", "3000", "--plot"],
    "recommend": ["recommend", "--k-max", "8", "--plot"],
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_text_leaves_the_canvas(kind, tmp_path, monkeypatch, capsys, run_file):
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    drawn = _figures(monkeypatch)
    argv = [str(run_file) if a == "RUN" else a for a in KINDS[kind]]
    out = tmp_path / "figure.png"
    argv += [str(out)] if argv[-1] == "--plot" else ["-o", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    assert drawn
    for fig in drawn:
        assert outside(fig) == ""
        assert _overlapping_annotations(fig) == []
