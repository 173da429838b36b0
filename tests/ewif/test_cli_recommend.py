"""``csd recommend``, ``csd evaluate`` and ``csd presets`` end to end (in-process)."""

from __future__ import annotations

import json
import struct

import pytest
import yaml

from ewif.cli import main
from ewif.files import model_set as model_io
from ewif.files import presets


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_recommend_default(capsys):
    rc, out, _ = run(capsys, "recommend")
    assert rc == 0
    for text in (
        "recommended cascade",
        "best plain SD",
        "gain over plain SD",
        "autoregressive      : EWIF 1.0000",
        "where the time goes",
        "81,000",
    ):
        assert text in out


def test_recommend_json_is_consistent(capsys):
    rc, out, _ = run(capsys, "recommend", "--json", "--k-max", "12")
    data = json.loads(out)
    assert rc == 0 and data["autoregressive"] == 1.0
    gain = data["recommended"]["ewif"] / data["best_sd"]["ewif"]
    assert data["gain_over_sd"] == pytest.approx(gain)
    assert sum(w["share"] for w in data["where_the_time_goes"]) == pytest.approx(1.0)
    assert data["table"][0]["ewif"] == data["recommended"]["ewif"]


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_recommend_from_file_and_evaluate(capsys, tmp_path, suffix):
    ms = presets.load_preset("flan-t5-ms")
    path = model_io.save(ms, tmp_path / f"set{suffix}")
    rc, out, _ = run(
        capsys, "recommend", "--from", str(path), "--json", "--k-max", "6", "--lenience", "3"
    )
    assert rc == 0 and json.loads(out)["recommended"]["lenience"] == 3
    rc, out, _ = run(capsys, "evaluate", str(path), "--json")
    data = json.loads(out)
    assert rc == 0 and data["K"] == [[8, 13, 10], [0, 1, 10], [0, 0, 10]] and data["ewif"] > 1


def test_recommend_full_space_on_t5_preset(capsys):
    rc, out, _ = run(capsys, "recommend", "--preset", "t5-ende-ms", "--json", "--k-max", "10")
    data = json.loads(out)
    assert rc == 0 and data["recommended"]["ewif"] >= data["best_sd"]["ewif"]


def test_plot_writes_two_pngs(capsys, tmp_path):
    rc, _, _ = run(capsys, "recommend", "--k-max", "8", "--plot", str(tmp_path / "r.png"))
    assert rc == 0
    for name in ("r-landscape.png", "r-decay.png"):
        head = (tmp_path / name).read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", head[16:24]) == (960, 630)


def test_presets_lists_sources(capsys):
    rc, out, _ = run(capsys, "presets")
    assert rc == 0 and "flan-t5-ms (default)" in out and "Leviathan" in out
    rc, out, _ = run(capsys, "presets", "--json")
    assert {p["name"] for p in json.loads(out)} == set(presets.names())


def test_bad_input_exit_2(capsys, tmp_path):
    assert run(capsys, "recommend", "--preset", "nope")[0] == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    rc, _, err = run(capsys, "recommend", "--from", str(bad))
    assert rc == 2 and "not valid JSON" in err and err.count("\n") == 1
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        yaml.safe_dump(
            {
                "schema": "csd.models/1",
                "models": ["t", "d"],
                "cost": [1, 0.1],
                "alpha": [[None, 1.5], [None, None]],
            }
        )
    )
    assert run(capsys, "recommend", "--from", str(broken))[0] == 2
    nosec = model_io.save(presets.load_preset("t5-cnndm-ms"), tmp_path / "nosec.json")
    rc, _, err = run(capsys, "evaluate", str(nosec))
    assert rc == 2 and "no 'cascade' section" in err
    assert run(capsys, "recommend", "--k-max", "0")[0] == 2
    assert run(capsys, "recommend", "--plot", str(tmp_path / "x.gif"))[0] == 2
    assert run(capsys, "presets", "nope")[0] == 2
