"""``csd simulate``: tables, JSON, plots, exit codes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ewif.cli import main
from ewif.files import model_set as model_io
from ewif.files.presets import load_preset
from ewif.kernel.cascade import Cascade


def _json(capsys, *argv: str) -> dict:
    assert main(["simulate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_default_preset_human_table(capsys) -> None:
    assert main(["simulate", "--trials", "20000", "--positions", "4"]) == 0
    out = capsys.readouterr().out
    assert "ewif" in out and "accept@4" in out and "chi-square" in out
    assert "agrees with the exact theory" in out


def test_json_holds_estimates_and_z_scores(capsys) -> None:
    out = _json(capsys, "--preset", "t5-cnndm-ms", "--trials", "20000", "--seed", "3")
    assert out["cascade"]["chosen"] == "recommended by ewif.search.recommendation"
    rows = {r["quantity"]: r for r in out["comparison"]["rows"]}
    assert {"ewif", "expected_tokens", "expected_cost", "calls[0]", "accept@1"} <= set(rows)
    sim = out["simulation"]
    assert sim["trials"] == 20000 and sim["seed"] == 3
    assert sim["ewif"]["low"] <= rows["ewif"]["exact"] <= sim["ewif"]["high"]
    assert abs(sum(sim["tokens_distribution"]) - 1.0) < 1e-12
    again = _json(capsys, "--preset", "t5-cnndm-ms", "--trials", "20000", "--seed", "3")
    assert again["simulation"]["ewif"] == sim["ewif"]  # reproducible


def test_file_with_cascade_section_and_command_line_override(tmp_path, capsys) -> None:
    ms = load_preset("flan-t5-ms")
    path = model_io.save(ms, tmp_path / "set.json")
    out = _json(capsys, str(path), "--trials", "5000", "--positions", "3")
    assert out["cascade"]["chosen"] == "the set's cascade section"
    assert out["cascade"]["K"] == ms.cascade.K.tolist()
    models = f"{ms.models[0]},{ms.models[3]}"
    out = _json(
        capsys, str(path), "--trials", "5000", "--models", models, "--K", "[[4]]", "--lenience", "1"
    )
    assert out["cascade"]["models"] == [ms.models[0], ms.models[3]]
    exact = ms.to_cascade(models=models.split(","), K=[[4]], lenience=1.0)
    assert out["comparison"]["rows"][0]["exact"] == pytest.approx(exact.ewif(), rel=1e-12)


def test_plot_and_bursty_report(tmp_path, capsys) -> None:
    from matplotlib import image

    png = tmp_path / "sim.png"
    out = _json(
        capsys, "--preset", "t5-ende-ms", "--trials", "5000", "--plot", str(png), "--rho", "0.5"
    )
    assert out["plot"] == str(png)
    img = image.imread(png)
    assert img.shape[:2] == (630, 1500) and img.std() > 0.05
    assert out["bursty"][0]["rho"] == 0.5 and out["bursty"][0]["ewif_iid"] > 0


def test_a_wrong_theory_gives_exit_status_1(monkeypatch, capsys) -> None:
    monkeypatch.setattr(Cascade, "ewif", lambda self: 1.0)
    assert main(["simulate", "--preset", "t5-ende-ms", "--trials", "5000"]) == 1
    assert "DISAGREES" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--preset", "nope"], "unknown preset"),
        (["--trials", "1"], "--trials"),
        (["--K", "[[2,"], "--K must be a JSON matrix"),
        (["--K", "[[1]]"], "K must have shape"),
        (["--level", "1.5"], "--level"),
        (["--positions", "0"], "--positions"),
        (["/no/such/file.json"], "cannot read"),
        (["--plot", "/no/such/dir/x.png"], "does not exist"),
        (["--plot", "x.gif"], "unknown suffix"),
        (["--rho", "1.0", "--trials", "100"], "rho"),
    ],
)
def test_bad_input_exit_2(argv, message, capsys) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("csd simulate: error:") and message in err and err.count("\n") == 1


def test_models_without_K_on_a_set_without_cascade(tmp_path, capsys) -> None:
    ms = load_preset("t5-ende-ms")
    path = model_io.save(ms, tmp_path / "set.yaml")
    assert main(["simulate", str(path), "--models", ms.models[0]]) == 2
    assert "--models needs --K" in capsys.readouterr().err
    assert np.isfinite(_json(capsys, str(path), "--trials", "2000")["steps_per_second"])


def test_replay_next_to_the_exact_ewif(tmp_path, capsys) -> None:
    """``--replay`` reports :func:`simulate.trace_replay.replay` of the cascade over the file's
    traces (seeded, 10 replays per prompt) next to the exact EWIF of the same lengths; a set
    without traces exits 2."""
    from simulate.trace_replay import replay
    from tests.simulate.test_trace_replay import _model_set, _traces

    values = {(1.0, 0, 1): 0.7, (1.0, 0, 2): 0.3, (1.0, 1, 2): 0.4}
    ms = _model_set(_traces(values, 4, 12))
    path = model_io.save(ms, tmp_path / "set.json")
    argv = [str(path), "--models", "t,d", "--K", "[[3]]", "--trials", "20000", "--replay"]
    out = _json(capsys, *argv)["replay"]
    assert out["prompts"] == 4 and out["mean_length"] == 12
    assert out["speedup"] == pytest.approx(replay(ms, ("t", "d"), [[3]], repeats=10).speedup)
    want = ms.to_cascade(("t", "d"), np.array([[3]])).ewif(12)
    assert out["ewif_same_lengths"] == pytest.approx(want, rel=1e-12)
    assert out["low"] <= out["speedup"] <= out["high"]
    assert main(["simulate", *argv]) == 0
    assert "trace replay over 4 measuring prompts" in capsys.readouterr().out
    assert main(["simulate", "--trials", "2000", "--replay"]) == 2
    assert "no acceptance traces" in capsys.readouterr().err


@pytest.mark.parametrize("curves", [True, False])
def test_a_set_with_catch_up_is_compared_without_it(tmp_path, capsys, curves) -> None:
    """A measured set's drafters pay the catch-up pass, which the Bernoulli engine does not
    price: the comparison uses the paper's accounting (and agrees), the EWIF with the
    catch-up pass is reported beside it."""
    from tests.simulate.test_trace_replay import _model_set, _traces

    ms = _model_set(_traces({(1.0, 0, 1): 0.7, (1.0, 0, 2): 0.3, (1.0, 1, 2): 0.4}, 2, 8))
    if not curves:
        ms = model_io.ModelSet(
            ms.models,
            np.array([1.0, 0.3, 0.05]),
            np.array([0.0, 0.1, 0.0]),
            ms.alpha,
            catch_up=ms.catch_up,
        )
    path = model_io.save(ms, tmp_path / "set.json")
    out = _json(capsys, str(path), "--models", "t,d", "--K", "[[3]]", "--trials", "20000")
    want = ms.to_cascade(("t", "d"), np.array([[3]])).ewif()
    assert out["catch_up"]["ewif_with_catch_up"] == pytest.approx(want, rel=1e-12)
    assert (
        main(["simulate", str(path), "--models", "t,d", "--K", "[[3]]", "--trials", "20000"]) == 0
    )
    assert "pay the catch-up pass" in capsys.readouterr().out
