"""The figures: shared style, each plot's numbers, and every ``csd plot`` kind end to end."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files import results as res
from ewif.plotting import style
from ewif.plotting.calibration import compute_calibration, draw_calibration
from ewif.plotting.ewif_vs_k import compute_ewif_vs_k, draw_ewif_vs_k
from ewif.theory.theorems import best_k, sd_ewif, vertical_ewif
from tests.notebooks.images import assert_image, png_size

# ----------------------------------------------------------------------------- fixtures


def _method(name, kind, tps, ar_tps, predicted=None, swi=None, mal=None, **extra):
    return {"name": name, "kind": kind, "tokens_per_s": tps, "speedup": tps / ar_tps,
            "predicted_speedup": predicted, "swi": swi, "mean_accepted_length": mal,
            "config": {}, **extra}


def results_dict() -> dict:
    """A small csd.results/1 run: AR, SD, CSD (with acceptance curves) and an HF baseline."""
    ar = 10.0
    return {
        "schema": "csd.results/1", "device": "cpu (2 cores)", "family": "fixture",
        "prompts": 4, "max_new_tokens": 32, "decoding": {"temperature": 0.0, "top_p": 1.0},
        "methods": [
            _method("AR", "autoregressive", ar, ar, 1.0, 1.0, 1.0, tokens=128),
            _method("SD k=4", "sd", 18.0, ar, 2.0, 1.95, 2.9, tokens=128),
            _method("CSD", "csd", 24.0, ar, 2.3, 2.35, 3.4, tokens=128,
                    acceptance_by_position={"measured": [0.8, 0.62, 0.5, 0.35],
                                            "predicted": [0.8, 0.64, 0.51, 0.41]}),
            _method("HF assisted", "hf-assisted", 15.0, ar),
        ],
        "metadata": {},
    }


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results_dict()))
    return path


# ----------------------------------------------------------------------------- style


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf", ".PNG"])
def test_style_saves_each_format_at_the_documented_size(tmp_path, suffix):
    fig, ax = style.figure("title", "x (tokens)", "y (× AR)")
    for i in range(len(style.COLOURS) + 1):  # wraps around the cycle
        ax.plot([0, 1, 2], [i, i + 1, i], label=str(i), **style.line(i))
    style.finish(ax, legend=False)  # a legend with no free place would grow the figure
    out = style.save(fig, tmp_path / f"f{suffix}")
    assert out.exists()
    assert_image(out, (960, 630))
    if suffix.lower() == ".png":
        assert png_size(out) == (960, 630)


def test_style_series_differ_without_colour():
    """Greyscale readability: neighbouring series never share line style or marker."""
    n = len(style.COLOURS)
    kws = [style.line(i) for i in range(n)]
    assert len({str(k["linestyle"]) for k in kws}) == n
    assert len({k["marker"] for k in kws}) == n


@pytest.mark.parametrize(
    ("name", "message"),
    [("fig.jpg", "unknown suffix '.jpg'"), ("fig", "no suffix; use one of .png, .svg, .pdf"),
     ("missing/fig.png", "does not exist")],
)
def test_style_refuses_unwritable_paths(tmp_path, name, message):
    with pytest.raises(ValueError, match=message):
        style.output_path(tmp_path / name)


def test_style_refuses_a_folder_and_non_paths(tmp_path):
    (tmp_path / "d.png").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        style.output_path(tmp_path / "d.png")
    with pytest.raises(TypeError, match="path must be a file path"):
        style.output_path(3)


# ----------------------------------------------------------------------------- calibration


def test_calibration_points_and_errors(results_file):
    points = {p.name: p for p in compute_calibration(results_file).points}
    assert points["SD k=4"].error == pytest.approx(2.0 / 1.8 - 1)
    assert points["CSD"].error == pytest.approx(2.3 / 2.4 - 1)
    assert points["AR"].error == 0.0
    assert points["HF assisted"].predicted is None and points["HF assisted"].error is None
    run = res.load(results_file)
    for m in run.methods:  # the plotted error is the file's own prediction error, signed
        if m.prediction_error is not None:
            assert abs(points[m.name].error) == pytest.approx(m.prediction_error)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_plot_calibration_writes_an_image(results_file, tmp_path, suffix):
    out = tmp_path / f"cal{suffix}"
    data = compute_calibration(results_file)
    assert draw_calibration(data, out) == out
    assert_image(out)
    assert "mean 7.6%" in data.summary  # (|2/1.8-1| + |2.3/2.4-1|)/2 = 7.64 %, in the title


def test_calibration_draws_prediction_intervals(tmp_path):
    data = results_dict()
    data["metadata"]["prediction_intervals"] = {
        "SD k=4": {"point": 2.0, "low": 1.7, "high": 2.2, "level": 0.9, "inside": True},
        "CSD": {"point": 2.3, "low": 2.25, "high": 2.35, "level": 0.9, "inside": False},
    }
    cal = compute_calibration(res.Results.from_dict(data))
    points = {p.name: p for p in cal.points}
    assert points["SD k=4"].interval == (1.7, 2.2) and points["AR"].interval is None
    assert cal.to_dict()["methods"][2]["interval"] == [2.25, 2.35]
    out = draw_calibration(cal, tmp_path / "cal.png")
    assert_image(out)


def test_plot_calibration_bad_input(tmp_path, results_file):
    wrong = tmp_path / "models.json"
    wrong.write_text(json.dumps({"schema": "csd.models/1", "models": []}))
    with pytest.raises(ValueError, match=r"schema must be 'csd\.results/1'"):
        compute_calibration(wrong)
    with pytest.raises(ValueError, match="unknown suffix"):
        draw_calibration(compute_calibration(results_file), tmp_path / "x.gif")
    with pytest.raises(TypeError, match="results must be"):
        compute_calibration(42)
    data = results_dict()
    for m in data["methods"]:
        m["predicted_speedup"] = None
    with pytest.raises(ValueError, match="nothing to calibrate"):
        compute_calibration(res.Results.from_dict(data))


# ----------------------------------------------------------------------------- ewif vs k

unit = st.floats(0.02, 0.98)
cost = st.floats(0.005, 0.5)


@settings(max_examples=40)
@given(a1=unit, a2=unit, a12=unit, c1=cost, c2=st.floats(0.0, 0.05))
def test_ewif_vs_k_curves_are_the_theorems(a1, a2, a12, c1, c2):
    sd1, sd2, vertical, horizontal = compute_ewif_vs_k(
        a1, c1, alpha2=a2, c2=c2, alpha12=a12, k_max=6, inner_k_max=5)
    ks = sd1.k
    assert all(np.array_equal(c.k, ks) for c in (sd2, vertical, horizontal))
    for c in (sd1, sd2, vertical, horizontal):
        assert c.ewif[0] == 1.0  # k = 0 is autoregressive for every curve
    np.testing.assert_allclose(sd1.ewif, sd_ewif(a1, ks, c1), rtol=1e-12)
    k_star, e_star = best_k(a1, c1)  # SD's exact optimum is inside the range and marked
    assert sd1.best_k == k_star and sd1.best_ewif == pytest.approx(e_star, rel=1e-12)
    # vertical: the best inner k' for each n, and it is what vertical_ewif gives there
    for n in range(1, ks.size):
        options = [vertical_ewif(a1, a12, kk, n, c1, c2) for kk in range(1, 6)]
        assert vertical.ewif[n] == pytest.approx(max(options), rel=1e-12)
        assert vertical_ewif(a1, a12, int(vertical.inner[n]), n, c1, c2) == pytest.approx(
            vertical.ewif[n], rel=1e-12)  # ties between inner k' may differ in the last ulp
    # horizontal: k1 = k is SD with d1, k1 = 0 is SD with d2, so it dominates both
    assert np.all(horizontal.ewif >= np.maximum(sd1.ewif, sd2.ewif) - 1e-12)
    assert np.all((horizontal.inner >= 0) & (horizontal.inner <= ks))


def test_ewif_vs_k_widens_the_range_to_hold_the_sd_optimum():
    (sd,) = compute_ewif_vs_k(0.95, 0.01, k_max=5)
    assert sd.best_k == best_k(0.95, 0.01)[0] > 5
    assert sd.k[-1] >= sd.best_k + 2


def test_ewif_vs_k_free_drafter_has_its_optimum_at_the_range_edge():
    (sd,) = compute_ewif_vs_k(0.5, 0.0, k_max=8)  # c = 0: EWIF rises for ever
    assert sd.k[-1] == 8 and sd.best_k == 8


def test_ewif_vs_k_edges_are_exact():
    (sd0,) = compute_ewif_vs_k(0.0, 0.1, k_max=4)
    np.testing.assert_array_equal(sd0.ewif, 1.0 / (1.0 + 0.1 * sd0.k))
    (sd1,) = compute_ewif_vs_k(1.0, 2.0, k_max=4)
    np.testing.assert_allclose(sd1.ewif, (sd1.k + 1) / (1.0 + 2.0 * sd1.k), rtol=1e-15)


def test_draw_ewif_vs_k_writes_the_four_curves(tmp_path):
    out = tmp_path / "evk.png"
    curves = compute_ewif_vs_k(0.8, 0.05, alpha2=0.5, c2=0.002, alpha12=0.7)
    assert draw_ewif_vs_k(curves, out) == out
    assert_image(out)
    assert [c.label.split(",")[0].split(":")[0] for c in curves] == [
        "SD", "SD", "vertical", "horizontal"]
    assert all(c.to_dict()["best_ewif"] == c.best_ewif >= 1.0 for c in curves)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"alpha1": 1.5, "c1": 0.1}, "alpha1 must be a finite number in \\[0, 1\\]"),
     ({"alpha1": 0.5, "c1": -1}, "c1 must be a finite number >= 0"),
     ({"alpha1": 0.5, "c1": 0.1, "alpha12": math.nan}, "alpha12 must be finite"),
     ({"alpha1": 0.5, "c1": 0.1, "k_max": 0}, "k_max must be an integer >= 1")],
)
def test_ewif_vs_k_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        compute_ewif_vs_k(**kwargs)


# ----------------------------------------------------------------------------- csd plot


def csd(capsys, *argv: str) -> tuple[int, str, str]:
    """Run ``csd`` in-process; argparse usage errors (SystemExit) become their status."""
    from ewif.cli import main

    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def model_set_file(tmp_path):
    """The default preset with a measured decay curve and its step count, as a file."""
    from ewif.files import model_set as model_io, presets

    ms = presets.load_preset()
    data = ms.to_dict()
    data["alpha_by_position"] = {"0,1": [0.76, 0.57, 0.41, 0.33, 0.22]}
    data["metadata"]["alpha_by_position_trials"] = {"0,1": 400}
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(data))
    assert model_io.load(path).alpha_by_position  # a valid csd.models/1 file
    return path


@pytest.mark.parametrize(
    ("kind", "args"),
    [("decay", ["--trials", "4000", "--max-position", "8"]),
     ("ewif-vs-k", ["--alpha", "0.8", "--cost", "0.05", "--alpha2", "0.5", "--cost2", "0.002",
                    "--alpha12", "0.7"]),
     ("ewif-vs-k", ["--preset", "t5-cnndm-ms"]),
     ("landscape", ["--models", "flan-t5-xxl", "flan-t5-base", "mag", "--K", "[[4,10],[0,10]]",
                    "--lenience", "3", "--k-max", "8"])],
)
def test_csd_plot_kinds_write_images(capsys, tmp_path, kind, args):
    out = tmp_path / f"{kind}.png"
    rc, stdout, err = csd(capsys, "plot", kind, *args, "-o", str(out))
    assert rc == 0, err
    assert f"csd plot {kind}: wrote {out}" in stdout
    assert_image(out)


def test_csd_plot_calibration_json(capsys, tmp_path, results_file):
    out = tmp_path / "cal.pdf"
    rc, stdout, err = csd(capsys, "plot", "calibration", str(results_file), "-o", str(out),
                          "--json")
    assert rc == 0, err
    data = json.loads(stdout)
    assert data["kind"] == "calibration" and data["path"] == str(out)
    errors = {m["name"]: m["error"] for m in data["methods"]}
    assert errors["SD k=4"] == pytest.approx(2.0 / 1.8 - 1) and errors["HF assisted"] is None
    assert_image(out)


@pytest.mark.parametrize("measured", ["results", "models"])
def test_csd_plot_decay_with_measured_points(capsys, tmp_path, results_file, model_set_file,
                                             measured):
    source = results_file if measured == "results" else model_set_file
    out = tmp_path / "decay.svg"
    preset = ["--preset", "flan-t5-ms"] if measured == "results" else []  # the run keeps none
    rc, stdout, err = csd(capsys, "plot", "decay", "--trials", "20000", "--seed", "3", *preset,
                          "--measured", str(source), "-o", str(out), "--json")
    assert rc == 0, err
    data = json.loads(stdout)
    meas, sim = data["measured"], data["simulated"]
    assert len(data["exact"]) == len(meas["p"]) == len(sim["p"])  # positions of the measured curve
    steps = 128 / 3.4 if measured == "results" else 400  # tokens / mean accepted length
    assert meas["trials"] == round(steps)
    for lo, p, hi in zip(meas["low"], meas["p"], meas["high"], strict=True):
        assert lo < p < hi  # a real interval from the step count
    # the exact curve lies inside the 99.9 % simulated intervals (a fixed seed; Bonferroni
    # would allow a miss with probability <= m * 0.001)
    assert all(lo <= e <= hi for lo, e, hi in zip(sim["low"], data["exact"], sim["high"],
                                                      strict=True))
    assert_image(out)


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["plot", "histogram", "-o", "x.png"], "invalid choice: 'histogram'"),
     (["plot", "decay", "-o", "/no/such/folder/x.png"], "does not exist"),
     (["plot", "landscape", "-o", "x.jpeg"], "unknown suffix '.jpeg'"),
     (["plot", "ewif-vs-k", "--alpha", "1.2", "--cost", "0.1", "-o", "x.png"],
      "alpha1 must be a finite number in [0, 1]"),
     (["plot", "ewif-vs-k", "--alpha", "0.8", "-o", "x.png"], "--alpha and --cost"),
     (["plot", "decay", "--K", "[[1,", "-o", "x.png"], "--K must be a JSON matrix"),
     (["plot", "decay", "--preset", "nope", "-o", "x.png"], "unknown preset 'nope'")],
)
def test_csd_plot_bad_input_is_one_line_exit_2(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    rc, _, err = csd(capsys, *argv)
    assert rc == 2
    assert message in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("option", ["calibration", "--measured"])
def test_csd_plot_wrong_schema_file_exit_2(capsys, tmp_path, option):
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"schema": "csd.models/9", "models": []}))
    out = tmp_path / "x.png"
    if option == "calibration":
        argv = ["plot", "calibration", str(wrong), "-o", str(out)]
    else:
        argv = ["plot", "decay", "--trials", "0", "--measured", str(wrong), "-o", str(out)]
    rc, _, err = csd(capsys, *argv)
    assert rc == 2 and "schema must be" in err and "'csd.models/9'" in err
    assert err.count("\n") == 1 and not out.exists()


def test_long_titles_are_wrapped_not_cut_off():
    long = "Qwen2.5-Coder 1.5B > 0.5B > Max-Gram on this CPU (float16, 2 threads, held-out prompts)"
    fig, ax = style.figure(long, "x", "y")
    lines = ax.get_title().split("\n")
    assert len(lines) >= 2 and all(len(line) <= style.TITLE_WIDTH for line in lines)
    assert " ".join(lines) == long


def test_landscape_axes_name_the_models():
    from ewif.plotting.landscape import budget_label

    models = ("flan-t5-xxl", "flan-t5-base", "flan-t5-small", "mag")
    assert budget_label(models, 1, 2) == (
        "$k_{12}$: tokens of flan-t5-small\nper review by flan-t5-xxl"
    )
    assert budget_label(models, 2, 3) == "$k_{23}$: tokens of mag\nper review by flan-t5-base"


def _pixels_under_legend(fig) -> np.ndarray:
    """The figure rendered without its legends and grid, cropped to each legend's box
    (1 px inside its frame): what the legend would hide."""
    boxes = []
    for legend in [ax.get_legend() for ax in fig.axes] + list(fig.legends):
        if legend is not None:
            boxes.append(legend.get_window_extent(fig.canvas.get_renderer()))
            legend.set_visible(False)
    for ax in fig.axes:
        ax.grid(False)
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3]
    height = image.shape[0]
    crops = [
        image[height - int(b.y1) + 2 : height - int(b.y0) - 2, int(b.x0) + 2 : int(b.x1) - 2]
        for b in boxes
    ]
    return np.concatenate([c.reshape(-1, 3) for c in crops]) if crops else np.zeros((0, 3))


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("decay", ["--trials", "4000", "--max-position", "8"]),
        ("ewif-vs-k", ["--preset", "t5-cnndm-ms"]),
        ("ewif-vs-k", ["--alpha", "0.8", "--cost", "0.05", "--alpha2", "0.5", "--cost2", "0.002",
                       "--alpha12", "0.7"]),
        ("calibration", None),
        ("simulate", None),
    ],
)
def test_legends_never_cover_data(capsys, tmp_path, monkeypatch, results_file, kind, args):
    """Checked on pixels, independently of how the legend was placed: with the legend and
    grid hidden, the region under each legend is blank paper."""
    from ewif.plotting import style

    figures, save = [], style.save
    monkeypatch.setattr(style, "save", lambda fig, path: (figures.append(fig), save(fig, path))[1])
    out = tmp_path / f"{kind}.png"
    if kind == "simulate":  # csd simulate --plot draws the simulation figure
        argv = ["simulate", "--preset", "t5-cnndm-ms", "--trials", "3000", "--plot", str(out)]
    else:
        argv = ["plot", kind, *(args or [str(results_file)]), "-o", str(out)]
    rc, _, err = csd(capsys, *argv)
    assert rc == 0, err
    (fig,) = figures
    assert fig.legends or any(ax.get_legend() is not None for ax in fig.axes)
    renderer, page = fig.canvas.get_renderer(), fig.bbox
    for legend in [ax.get_legend() for ax in fig.axes] + list(fig.legends):
        if legend is not None:  # and no legend is cut off by the figure's edge
            box = legend.get_window_extent(renderer)
            assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0
    hidden = _pixels_under_legend(fig)
    assert hidden.size and (hidden == 255).all(), f"{(hidden != 255).any(axis=1).sum()} px"
