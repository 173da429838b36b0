"""``csd recommend`` / ``csd evaluate`` with pass-cost curves and the honest decision."""

from __future__ import annotations

import json
import re

import pytest

from ewif.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def write(tmp_path, name, **changes):
    data = {
        "schema": "csd.models/2",
        "models": ["t", "b", "s", "m"],
        "cost_curve": [[1.0, 1.02, 1.01, 1.05], [0.0227, 0.03], [0.007], [0.0]],
        "alpha": [
            [None, 0.75, 0.68, 0.3],
            [None, None, 0.8, 0.33],
            [None, None, None, 0.36],
            [None, None, None, None],
        ],
        "cascade": {"models": ["t", "b", "m"], "K": [[3, 2], [0, 4]]},
    }
    data.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_recommend_explains_review_sizes_with_curves(capsys, tmp_path):
    path = write(tmp_path, "curves.json")
    rc, out, _ = run(capsys, "recommend", "--from", path, "--k-max", "6", "--json")
    data = json.loads(out)
    assert rc == 0 and data["cost_model"] == "curve" and data["decision"] == "speculative"
    target = data["review_sizes"][0]
    assert target["model"] == "t" and target["passes"] == pytest.approx(1.0)
    assert 2 <= target["m_min"] <= target["m_mean"] <= target["m_max"]
    assert sum(target["m_pmf"]) == pytest.approx(1.0)
    assert sum(r["cost"] for r in data["review_sizes"]) == pytest.approx(
        data["recommended"]["expected_cost"], rel=1e-12
    )
    rc, out, _ = run(capsys, "recommend", "--from", path, "--k-max", "6")
    assert rc == 0 and "review sizes" in out and "the target reviews m = " in out
    rc, out, _ = run(capsys, "evaluate", path)
    assert rc == 0 and "the target reviews m = " in out


def test_autoregressive_decision_is_stated(capsys, tmp_path):
    path = write(tmp_path, "dear.json", cost_curve=[[1.0, 1.5], [0.9], [0.8], [0.7]])
    rc, out, _ = run(
        capsys, "recommend", "--from", path, "--space", "full", "--k-max", "2", "--json"
    )
    data = json.loads(out)
    assert rc == 0 and data["decision"] == "autoregressive"
    assert data["recommended"]["ewif"] <= 1.0
    rc, out, _ = run(capsys, "recommend", "--from", path, "--space", "full", "--k-max", "2")
    assert "on these costs, decode autoregressively; the best speculative configuration is" in out
    rc, out, _ = run(capsys, "evaluate", path)
    assert rc == 0 and "decode autoregressively" in out
    rc, out, _ = run(capsys, "evaluate", path, "--json")
    assert json.loads(out)["decision"] == "autoregressive"


@pytest.mark.parametrize(
    ("curves", "match"),
    [
        ([[1.0], [0.02, -0.1], [0.007], [0.0]], r"cost_curve\[1\] \(model 1\)"),
        ([[1.0], [0.02], [], [0.0]], r"cost_curve\[2\] \(model 2\) is empty"),
        ([[1.0], [0.02], ["x"], [0.0]], r"cost_curve\[2\] \(model 2\) must hold numbers"),
        ([[1.0], [0.02], [0.007]], r"one curve per model \(4\), got 3"),
        ([[2.0], [0.02], [0.007], [0.0]], r"cost_curve\[0\]\[0\]"),
    ],
)
def test_bad_curves_exit_2_with_one_line(capsys, tmp_path, curves, match):
    path = write(tmp_path, "bad.json", cost_curve=curves)
    for argv in (("recommend", "--from", path), ("evaluate", path)):
        rc, out, err = run(capsys, *argv)
        assert rc == 2 and out == "" and err.count("\n") == 1
        assert re.search(match, err), err


def test_evaluate_at_a_generation_length(capsys, tmp_path):
    """``--max-new-tokens N`` adds the exact EWIF of an N-token generation (Theorem FL): below
    the endless one, equal to Cascade.ewif(N); a bad N exits 2 with one line."""
    from ewif.files import model_set as model_io

    path = write(tmp_path, "curves.json")
    rc, out, _ = run(capsys, "evaluate", path, "--max-new-tokens", "16", "--json")
    data = json.loads(out)
    want = model_io.load(path).to_cascade().ewif(16)
    assert rc == 0 and data["ewif_at_length"] == pytest.approx(want, rel=1e-12)
    assert data["ewif_at_length"] < data["ewif"]
    rc, out, _ = run(capsys, "evaluate", path, "--max-new-tokens", "16")
    assert rc == 0 and "EWIF of a generation of 16 tokens" in out
    rc, _, err = run(capsys, "evaluate", path, "--max-new-tokens", "0")
    assert rc == 2 and "--max-new-tokens must be an integer >= 1, got 0" in err
