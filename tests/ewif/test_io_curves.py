"""Model-set files with pass-cost curves (csd.models/2), catch-up flags (/3), and old /1 files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ewif.files import model_set as model_io
from ewif.files.presets import _DIR, load_preset, names

CURVES = [[1.0, 1.02, 1.05, 1.09], [0.0227, 0.0231], [0.007], [0.0]]


def curve_dict(**changes):
    data = {
        "schema": "csd.models/2",
        "models": ["t", "b", "s", "m"],
        "cost_curve": CURVES,
        "alpha": [
            [None, 0.7, 0.6, 0.3],
            [None, None, 0.8, 0.4],
            [None, None, None, 0.5],
            [None, None, None, None],
        ],
    }
    data.update(changes)
    return data


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_round_trip_with_curves(tmp_path, suffix):
    ms = model_io.ModelSet.from_dict(curve_dict())  # cost omitted: the curves' m = 1 values
    assert ms.cost.tolist() == [1.0, 0.0227, 0.007, 0.0]
    assert ms.cost_per_token.tolist() == [0, 0, 0, 0]
    back = model_io.load(model_io.save(ms, tmp_path / f"set{suffix}"))
    assert [c.tolist() for c in back.cost_curve] == CURVES
    assert back.cost.tolist() == ms.cost.tolist()
    assert back.pass_cost.at(0, 6) == pytest.approx(1.17)  # 1.09 + 2 * 0.04
    assert back.to_dict()["schema"] == model_io.SCHEMA == "csd.models/6"


def test_old_schema_reads_with_the_same_meaning(tmp_path):
    ms = load_preset("flan-t5-ms")
    data = ms.to_dict()
    data["schema"] = "csd.models/1"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = model_io.load(path)
    assert old.cost_curve is None and old.pass_cost.kind == "affine"
    assert old.cost.tolist() == ms.cost.tolist()
    assert model_io.save(old, tmp_path / "new.json").read_text().count('"csd.models/6"') == 1
    for name in names():  # the csd.models/1 presets still read, without curves
        if '"csd.models/1"' in (_DIR / f"{name}.json").read_text():
            assert load_preset(name).cost_curve is None


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"schema": "csd.models/1"}, r"cost_curve needs schema 'csd.models/2'"),
        ({"schema": "csd.models/7"}, "schema must be one of"),
        ({"schema": "csd.models/4", "row_cost": [0, 0.01, 0, 0]}, r"row_cost needs schema"),
        ({"schema": "csd.models/5", "row_cost": [0, -0.01, 0, 0]}, r"row_cost must hold finite"),
        ({"schema": "csd.models/5", "row_cost": [0, 0.01]}, r"row_cost must hold one cost per"),
        ({"cost": [1, 0.02, 0.007, 0]}, r"cost must equal the m = 1 values"),
        ({"cost_per_token": [0, 0.01, 0, 0]}, "cost_per_token must be zero"),
        ({"cost_curve": CURVES[:3]}, r"one curve per model \(4\), got 3"),
        ({"cost_curve": [*CURVES[:3], []]}, r"cost_curve\[3\] \(model 3\) is empty"),
        ({"cost_curve": [*CURVES[:3], [0, -1]]}, r"cost_curve\[3\] \(model 3\).*-1 at m = 2"),
        ({"cost_curve": [[2.0], *CURVES[1:]]}, r"cost_curve\[0\]\[0\]"),
    ],
)
def test_bad_curve_files(changes, match):
    with pytest.raises(ValueError, match=match):
        model_io.ModelSet.from_dict(curve_dict(**changes), source="f.json")
    with pytest.raises(ValueError, match=r"^f\.json: "):
        model_io.ModelSet.from_dict(curve_dict(**changes), source="f.json")


def test_model_set_validates_curves_directly():
    ms = load_preset("flan-t5-ms")
    import dataclasses

    with pytest.raises(ValueError, match="m = 1 values"):
        dataclasses.replace(
            ms, cost_curve=(np.array([1.0]), np.array([0.5]), np.array([0.1]), np.array([0.0]))
        )
    ok = dataclasses.replace(ms, cost_curve=tuple(np.array([c]) for c in ms.cost))
    assert ok.pass_cost.kind == "curve" and ok.pass_cost.is_affine(0)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_row_cost_round_trips_and_reaches_the_cascade(tmp_path, suffix):

    flags = [False, True, True, False]
    rows = [0, 0.0003, 0, 0]  # at most b's curve's slope, 0.0004: its extension is unchanged
    data = curve_dict(schema="csd.models/5", catch_up=flags, row_cost=rows)
    back = model_io.load(
        model_io.save(model_io.ModelSet.from_dict(data), tmp_path / f"set{suffix}")
    )
    assert back.row_cost.tolist() == rows
    assert back.pass_cost.row_cost.tolist() == rows
    K = [[2, 0], [0, 1]]
    priced = back.to_cascade(["t", "b", "m"], K)
    older = model_io.ModelSet.from_dict(curve_dict(schema="csd.models/4", catch_up=flags))
    unpriced = older.to_cascade(["t", "b", "m"], K)
    saved = 0.0003 * priced.catch_up_positions(1)
    assert saved > 0
    assert priced.expected_cost() == pytest.approx(unpriced.expected_cost() - saved, rel=1e-12)
    assert (
        model_io.ModelSet.from_dict(curve_dict()).row_cost is None
    )  # older files: every row priced


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_catch_up_flags_round_trip_and_reach_the_cascade(tmp_path, suffix):

    ms = model_io.ModelSet.from_dict(
        curve_dict(schema="csd.models/3", catch_up=[False, True, True, False])
    )
    back = model_io.load(model_io.save(ms, tmp_path / f"set{suffix}"))
    assert back.catch_up == (False, True, True, False)
    assert model_io.ModelSet.from_dict(curve_dict()).catch_up is None  # /2 files: the paper's m
    K = [[2, 0], [0, 1]]
    on = back.to_cascade(["t", "b", "m"], K)
    off = back.to_cascade(["t", "b", "m"], K, catch_up=[False] * 3)
    assert on.catch_up.tolist() == [False, True, False]
    assert on.expected_cost() > off.expected_cost()  # the base drafter feeds more positions


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"catch_up": [False, True, True, False]}, r"catch_up needs schema 'csd.models/3'"),
        ({"schema": "csd.models/3", "catch_up": [False, True]}, "catch_up"),
        ({"schema": "csd.models/3", "catch_up": [0, 1, "yes", 0]}, "catch_up"),
    ],
)
def test_bad_catch_up_flags(changes, match):
    with pytest.raises(ValueError, match=rf"^f\.json: .*{match}"):
        model_io.ModelSet.from_dict(curve_dict(**changes), source="f.json")


def test_batch_cost_curve_round_trips_and_needs_schema_4(tmp_path):
    from ewif.files.batch_costs import BatchCosts

    data = curve_dict(schema="csd.models/3", catch_up=[False, True, True, False])
    three = model_io.ModelSet.from_dict(data, source="f.json")  # a /3 file still reads
    assert three.batch_costs is None and three.catch_up == (False, True, True, False)
    per_b = {2: ([1.3, 1.45], [0.03, 0.04], [0.008], [0.0]), 4: ([1.6], [0.05], [0.01], [0.0])}
    batched = {**data, "schema": "csd.models/4", "batch_cost_curve": per_b}
    ms = model_io.ModelSet.from_dict(batched, source="f.json")
    assert isinstance(ms.batch_costs, BatchCosts) and ms.batch_costs.at(0, 2, 2) == 1.45
    back = model_io.load(model_io.save(ms, tmp_path / "b.json"))
    assert back.batch_costs.to_dict() == ms.batch_costs.to_dict()
    with pytest.raises(ValueError, match=r"batch_cost_curve needs schema 'csd.models/4'"):
        model_io.ModelSet.from_dict({**batched, "schema": "csd.models/3"}, source="f.json")
    with pytest.raises(ValueError, match=r"^f\.json: batch_cost_curve must hold one curve per"):
        model_io.ModelSet.from_dict(
            {**batched, "batch_cost_curve": {2: [[1.0]] * 3}}, source="f.json"
        )
