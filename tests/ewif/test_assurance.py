"""The decision rules (ewif.predict.assurance): the assured rule speculates only where the
configuration's interval lies above AR, never where the mean would not; the mean's test
without per-prompt evidence; csd recommend's --decision."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.cli import main
from ewif.files import model_set as model_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.kernel.cascade import Cascade
from ewif.predict.assurance import DECISION_RULES, check_rule, decide

CURVES = [[1.0, 1.05, 1.1], [0.05, 0.06]]


def sd_set(accepted: list[int], positions: int = 32) -> model_io.ModelSet:
    """SD target ← drafter ``d`` with α pooled from per-prompt ``accepted`` of ``positions``."""
    rows = np.array([[a, positions] for a in accepted], dtype=float)
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = rows[:, 0].sum() / rows[:, 1].sum()
    return model_io.ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, 0.05]),
        cost_per_token=np.zeros(2),
        alpha={1.0: alpha},
        cost_curve=tuple(np.array(c) for c in CURVES),
        bootstrap=BootstrapData({(1.0, 0, 1): rows}),
    )


def ewif_of(ms: model_io.ModelSet, k: int) -> float:
    return Cascade(ms.alpha[1.0], None, [[k]], cost_curve=ms.cost_curve).ewif()


# Prompts that disagree: the pooled α (0.25) prices k = 1 just above AR, the interval does not.
SPREAD = [0, 0, 1, 2, 30, 0, 1, 2]


def test_a_lead_inside_the_noise_is_not_assured_and_the_mean_runs_it():
    ms = sd_set(SPREAD)
    ewif = ewif_of(ms, 1)
    assert ewif > 1.0
    assured = decide(ms, ["t", "d"], [[1]], 1.0, ewif)
    assert assured.decision == "autoregressive" and assured.unassured
    assert assured.interval is not None and assured.interval.low < 1.0 < assured.interval.high
    assert "reaching below AR's 1" in assured.reason()
    mean = decide(ms, ["t", "d"], [[1]], 1.0, ewif, "mean")
    assert mean.decision == "speculative" and not mean.unassured and mean.interval is None


def test_a_clear_lead_is_assured():
    ms = sd_set([24, 25, 26, 23, 25, 24, 26, 25])
    ewif = ewif_of(ms, 4)
    decided = decide(ms, ["t", "d"], [[4]], 1.0, ewif)
    assert decided.decision == "speculative" and decided.interval.low > 1.0
    assert "above AR's 1" in decided.reason()


def test_without_per_prompt_evidence_both_rules_are_the_mean():
    ms = dataclasses.replace(sd_set(SPREAD), bootstrap=None)
    ewif = ewif_of(ms, 1)
    decided = decide(ms, ["t", "d"], [[1]], 1.0, ewif)
    assert decided.decision == "speculative" and decided.interval is None
    assert "no interval" in decided.reason()


def test_no_speed_up_is_autoregressive_under_both_rules():
    ms = sd_set([0, 0, 0, 1, 0, 0, 0, 0])
    ewif = ewif_of(ms, 3)
    assert ewif < 1.0
    for rule in DECISION_RULES:
        decided = decide(ms, ["t", "d"], [[3]], 1.0, ewif, rule)
        assert decided.decision == "autoregressive" and not decided.unassured


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(0, 32), min_size=2, max_size=8), st.integers(1, 6))
def test_assured_never_speculates_where_the_mean_does_not(accepted, k):
    ms = sd_set(accepted)
    ewif = ewif_of(ms, k)
    assured = decide(ms, ["t", "d"], [[k]], 1.0, ewif)
    mean = decide(ms, ["t", "d"], [[k]], 1.0, ewif, "mean")
    assert mean.decision == ("speculative" if ewif > 1.0 else "autoregressive")
    if assured.decision == "speculative":
        assert mean.decision == "speculative" and assured.interval.low > 1.0
    assert assured.unassured == (mean.decision == "speculative" != assured.decision)


def test_an_unknown_rule_is_named():
    with pytest.raises(ValueError, match="assured, mean, got 'median'"):
        check_rule("median")
    with pytest.raises(ValueError, match="got 'median'"):
        decide(sd_set(SPREAD), ["t", "d"], [[1]], 1.0, 1.1, "median")


def write(tmp_path, ms) -> str:
    path = tmp_path / "set.json"
    model_io.save(ms, path)
    return str(path)


def test_csd_recommend_decides_by_the_rule(tmp_path, capsys):
    path = write(tmp_path, sd_set(SPREAD))
    args = ["recommend", "--from", path, "--space", "full", "--k-max", "3", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["recommended"]["ewif"] > 1.0  # the mean speculates; the assured rule does not
    assert out["decision"] == "autoregressive" and out["decision_rule"] == "assured"
    assert out["choice"] == "autoregressive"
    assert "not assured" in out["decision_line"] and "--decision mean" in out["decision_line"]
    assert main([*args, "--decision", "mean"]) == 0
    mean = json.loads(capsys.readouterr().out)
    assert mean["decision"] == "speculative" and mean["decision_rule"] == "mean"
    assert "within the noise of AR" in mean["decision_line"]


def test_csd_recommend_refuses_an_unknown_rule(tmp_path, capsys):
    path = write(tmp_path, sd_set(SPREAD))
    with pytest.raises(SystemExit) as exc:
        main(["recommend", "--from", path, "--decision", "median"])
    assert exc.value.code == 2
    assert "median" in capsys.readouterr().err
