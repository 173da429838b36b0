"""``csd recommend --mix``: a workload of categories priced by Theorem MX; bad mixes are one line
and exit 2."""

from __future__ import annotations

import json

import pytest

from ewif import cli
from ewif.files import model_set as model_io
from ewif.files.categories import parse_mix
from ewif.search.mix import recommend_mix

from .test_mix import SETS, category_set


@pytest.fixture(scope="module")
def set_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("mix") / "m.json"
    model_io.save(category_set(SETS), path)
    return path


def test_the_mix_is_recommended_with_its_interval(set_file, capsys):
    assert (
        cli.main(
            [
                "recommend",
                "--from",
                str(set_file),
                "--mix",
                "code=5,rag=5",
                "--json",
                "--space",
                "full",
                "--k-max",
                "4",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    again = recommend_mix(model_io.load(set_file), parse_mix("code=1,rag=1"), space="full", k_max=4)
    assert out["ewif"] == pytest.approx(again.best.ewif) and out["certified"]
    assert out["mix"] == {"code": 0.5, "rag": 0.5}
    assert out["interval"]["low"] < out["ewif"] < out["interval"]["high"]
    assert (
        cli.main(["recommend", "--from", str(set_file), "--mix", "writing=1", "--k-max", "3"]) == 0
    )
    text = capsys.readouterr().out
    assert "Theorem MX" in text and "α t<-d" in text and "90% interval" in text


@pytest.mark.parametrize(
    ("mix", "message"),
    [
        ("poetry=1", "unknown category 'poetry' in the mix; the model set measured: code"),
        ("code=-0.5,rag=1", "the weight of 'code' in the mix must be a finite number >= 0"),
        ("code=0,rag=0", "the mix's weights are all zero"),
        ("code", "the mix must be NAME=WEIGHT"),
    ],
)
def test_bad_mixes_exit_2_with_one_line(set_file, capsys, mix, message):
    assert cli.main(["recommend", "--from", str(set_file), "--mix", mix]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("csd recommend: error: ")


def test_a_set_without_categories_says_so(capsys):
    assert cli.main(["recommend", "--preset", "flan-t5-ms", "--mix", "code=1"]) == 2
    assert "no α per category" in capsys.readouterr().err
