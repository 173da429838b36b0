"""The results file csd.results/1: round trip and the validator's errors."""

from __future__ import annotations

import json

import pytest

from ewif.files import results as r


def _run(**over):
    methods = r.with_speedups(
        [
            r.MethodResult("AR", "autoregressive", 5.0, None, 1.0, 1.0, 1.0),
            r.MethodResult(
                "CSD",
                "csd",
                9.0,
                None,
                1.9,
                1.85,
                3.2,
                {"measured": [0.8, 0.6], "predicted": [0.82, 0.6]},
                {"models": ["t", "d"], "K": [[2]], "lenience": 1.0},
                tokens=90,
                seconds=10.0,
            ),
            r.MethodResult("PL", "hf-prompt-lookup", 4.0, None),
        ]
    )
    kw = dict(
        device="cpu",
        family="f",
        prompts=2,
        max_new_tokens=8,
        decoding={"temperature": 0.0, "top_p": 1.0},
        methods=methods,
        metadata={},
    )
    return r.Results(**{**kw, **over})


def test_round_trip_and_derived_numbers(tmp_path):
    res = _run()
    assert r.load(r.save(res, tmp_path / "x.json")) == res
    csd = res.method("CSD")
    assert csd.speedup == pytest.approx(1.8)
    assert csd.prediction_error == pytest.approx(1.9 / 1.8 - 1)
    assert csd.swi_error == pytest.approx(1.85 / 1.8 - 1)
    assert res.method("PL").prediction_error is None
    assert json.loads((tmp_path / "x.json").read_text())["methods"][1][
        "prediction_error"
    ] == pytest.approx(csd.prediction_error)


def test_speedups_are_null_without_ar():
    methods = r.with_speedups([r.MethodResult("CSD", "csd", 9.0, None)])
    assert methods[0].speedup is None
    _run(methods=methods)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(schema="csd.models/1"), "schema must be"),
        (lambda d: d["methods"][1].update(speedup=2.0), "speedup must be tokens_per_s"),
        (lambda d: d["methods"][1].update(kind="beam"), "kind must be one of"),
        (lambda d: d["methods"][1].update(mean_accepted_length=0.5), "counts the bonus"),
        (lambda d: d["methods"][1].update(extra=1), "unknown keys"),
        (
            lambda d: d["methods"][1].update(acceptance_by_position={"measured": [1.5]}),
            "acceptance_by_position",
        ),
        (lambda d: d["methods"].append(dict(d["methods"][0])), "distinct"),
        (lambda d: d.update(decoding={"temperature": 0.0}), "decoding"),
        (lambda d: d.pop("family"), "missing required key 'family'"),
        (lambda d: d.update(max_new_tokens=0), "max_new_tokens"),
    ],
)
def test_validator_names_the_problem(change, message):
    data = _run().to_dict()
    change(data)
    with pytest.raises(ValueError, match=message):
        r.Results.from_dict(data, "f.json")


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        r.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        r.load(bad)
    with pytest.raises(ValueError, match="cannot write"):
        r.save(_run(), tmp_path / "no" / "dir" / "x.json")
