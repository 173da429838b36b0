"""c(m, L): the context_cost key of csd.models/6, pricing at a context length, and the
speed-up of a workload whose prompts sit at different lengths."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files import model_set as model_io
from ewif.files.context_cost import ContextCost
from ewif.predict.context import at_context, workload_speedup

CURVES = [[1.0, 1.7, 2.4, 3.1], [0.37, 0.66], [0.001]]
KEY = {
    "tokens": 400.0,
    "ar_tokens": 380.0,
    "ar_slope": 0.0006,
    "slope": [[0.0006, 0.00062, 0.00064, 0.00066], [0.0003, 0.0003], [0.0]],
    "span": [100, 1000],
}


def data(**changes):
    out = {
        "schema": "csd.models/6",
        "models": ["t", "d", "mag"],
        "cost_curve": CURVES,
        "catch_up": [False, True, False],
        "row_cost": [0.0, 0.02, 0.0],
        "context_cost": KEY,
        "alpha": [[None, 0.8, 0.3], [None, None, 0.4], [None, None, None]],
    }
    out.update(changes)
    return out


def test_round_trip_and_old_files(tmp_path):
    ms = model_io.ModelSet.from_dict(data())
    back = model_io.load(model_io.save(ms, tmp_path / "set.json"))
    assert back.context_cost is not None and back.context_cost.to_dict() == KEY
    assert json.loads((tmp_path / "set.json").read_text())["schema"] == "csd.models/6"
    old = data(schema="csd.models/5")
    del old["context_cost"]
    assert model_io.ModelSet.from_dict(old).context_cost is None  # /5 still reads
    with pytest.raises(ValueError, match=r"context_cost needs schema 'csd\.models/6'"):
        model_io.ModelSet.from_dict(data(schema="csd.models/5"))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"slope": [[0.1], [0.1]]}, r"slope must hold one list per model \(3\)"),
        ({"span": [10]}, r"span must be \[low, high\]"),
        ({"span": [900, 100]}, r"low <= high"),
        ({"tokens": -1}, r"context_cost.tokens must be a finite number >= 0"),
        ({"ar_slope": "x"}, r"ar_slope must be a real number"),
        ({"slope": [[0.1], [None], [0.0]]}, r"slope\[1\] \(model 1\)"),
        ({"slope": [[0.1], [], [0.0]]}, r"slope\[1\] \(model 1\) must be a non-empty list"),
    ],
)
def test_bad_keys_are_named(change, match):
    with pytest.raises(ValueError, match=match):
        model_io.ModelSet.from_dict(data(context_cost={**KEY, **change}), source="f.json")
    with pytest.raises(ValueError, match="context_cost is missing span"):
        model_io.ModelSet.from_dict(
            data(context_cost={k: v for k, v in KEY.items() if k != "span"})
        )


def test_prices_at_a_length():
    ms = model_io.ModelSet.from_dict(data())
    cc = ms.context_cost
    assert cc.unit_at(380.0) == 1.0
    long = at_context(ms, 1000.0)
    unit = 1 + 620 * 0.0006
    np.testing.assert_allclose(
        long.cost_curve[0],
        [1.0, *(np.array(CURVES[0][1:]) + 600 * np.array([6.2, 6.4, 6.6]) * 1e-4) / unit],
    )
    np.testing.assert_allclose(long.cost_curve[1], (np.array(CURVES[1]) + 600 * 3e-4) / unit)
    assert long.row_cost[1] == pytest.approx(0.02 / unit) and long.context_cost is None
    assert long.metadata["context_tokens"] == 1000.0
    beyond = cc.curves_at(
        [np.array(CURVES[0] + [3.8]), np.array(CURVES[1]), np.array([0.001])], 1000.0
    )
    assert beyond[0][-1] == pytest.approx((3.8 + 600 * 0.00066) / unit)  # last slope carried on
    assert (
        at_context(model_io.ModelSet.from_dict({**data(), "context_cost": None}), 5.0).context_cost
        is None
    )
    # outside the span the fit saw, a length is priced at the span's nearest edge
    assert cc.unit_at(-5000.0) == cc.unit_at(100.0) == pytest.approx(1 - 280 * 0.0006)
    edge = at_context(ms, 1000.0).cost_curve
    for far, at_edge in zip(at_context(ms, 4000.0).cost_curve, edge, strict=True):
        np.testing.assert_array_equal(far, at_edge)
    steep = ContextCost(400.0, 380.0, 0.01, cc.slope, (100.0, 1000.0))
    with pytest.raises(ValueError, match="does not admit"):
        steep.unit_at(150.0)  # 1 + (150 − 380) · 0.01 < 0 inside the span


def test_without_context_cost_the_workload_is_theorem_fl():
    plain = model_io.ModelSet.from_dict({**data(), "context_cost": None})
    K = np.array([[2, 1], [0, 2]])
    cascade = plain.to_cascade(("t", "d", "mag"), K, 1.0)
    got = workload_speedup(plain, ("t", "d", "mag"), K, 1.0, [(100, 32), (900, 20)])
    assert got == pytest.approx(cascade.ewif([32, 20]))
    with pytest.raises(ValueError, match="at least one"):
        workload_speedup(plain, ("t", "d", "mag"), K, 1.0, [])


@settings(max_examples=30, deadline=None)
@given(beta=st.floats(0.0, 0.002), length=st.floats(0.0, 2000.0), n=st.integers(1, 64))
def test_costs_that_scale_alike_leave_the_speedup_alone(beta, length, n):
    """When every cost grows with L by the same factor as the AR token (no logit row cost,
    which does not grow with L), a cascade's speed-up at L equals its speed-up at the
    reference length."""
    curves = [np.array(c) for c in CURVES]
    slope = [beta * c for c in curves]
    cc = ContextCost(400.0, 400.0, beta * 1.0, tuple(slope), (0.0, 2000.0))
    ms = model_io.ModelSet.from_dict({**data(), "context_cost": cc.to_dict(), "row_cost": None})
    K = np.array([[1, 2], [0, 3]])
    names = ("t", "d", "mag")
    ref = at_context(ms, 400.0).to_cascade(names, K, 1.0).ewif([n])
    assert workload_speedup(ms, names, K, 1.0, [(length, n)]) == pytest.approx(ref, rel=1e-9)
