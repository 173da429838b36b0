"""Trace replay (:mod:`simulate.trace_replay`): exact at α = 0 and 1, the i.i.d. theory's
Monte Carlo when the traces hold constant probabilities, clustering visible, bad input."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files import model_set as model_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.predict.bootstrap import prediction_interval
from simulate.trace_replay import replay

CURVES = [[1.0, 1.1, 1.25, 1.4, 1.6, 1.7], [0.3, 0.55, 0.6, 0.7], [0.05, 0.09]]
NAMES = ("t", "d", "mag")


def _model_set(traces: dict, leniences=(1.0,), catch_up=(False, True, False)) -> model_io.ModelSet:
    """Target, a neural drafter and Max-Gram with the given per-prompt traces; α = their means."""
    alpha = {}
    for lenience in leniences:
        a = np.full((3, 3), np.nan)
        for (l_, r, j), arrays in traces.items():
            if l_ == lenience or (r == 0 and l_ == 1.0):
                a[r, j] = float(np.concatenate(arrays).mean())
        alpha[lenience] = a
    by_prompt = {k: np.array([[a.sum(), a.size] for a in v]) for k, v in traces.items()}
    return model_io.ModelSet(
        models=NAMES,
        cost=np.array([c[0] for c in CURVES]),
        cost_per_token=np.zeros(3),
        alpha=alpha,
        cost_curve=tuple(np.array(c) for c in CURVES),
        catch_up=catch_up,
        bootstrap=BootstrapData(by_prompt, None, {k: tuple(v) for k, v in traces.items()}),
    )


def _constant(value: float, prompts: int, length: int) -> tuple[np.ndarray, ...]:
    return tuple(np.full(length, value) for _ in range(prompts))


def _traces(values: dict, prompts: int, length: int) -> dict:
    return {key: _constant(v, prompts, length) for key, v in values.items()}


@pytest.mark.parametrize("value", [0.0, 1.0])
@pytest.mark.parametrize(
    "models,K,lenience",
    [
        (("t", "d"), [[3]], 1.0),
        (("t", "d", "mag"), [[2, 1], [0, 2]], 1.0),
        (("t", "d", "mag"), [[3, 2], [0, 4]], 3.0),
        (("t", "mag"), [[4]], 1.0),
    ],
)
@pytest.mark.parametrize("h,s", [(0.0, 0.0), (0.04, 0.0), (0.04, 0.03), (0.0, 0.03)])
def test_deterministic_traces_equal_the_exact_ewif(value, models, K, lenience, h, s) -> None:
    """All-accept or all-reject traces leave nothing to chance: the replay's speed-up on
    generations of the traces' length equals the exact EWIF of that length (Theorem FL),
    catch-up and the drafter's logit rows (priced at ``h``, with a row step ``s``) included,
    to 1e-12."""
    keys = [(1.0, 0, 1), (1.0, 0, 2), (1.0, 1, 2), (lenience, 1, 2)]
    ms = _model_set(_traces(dict.fromkeys(keys, value), 3, 11), leniences=sorted({1.0, lenience}))
    ms = dataclasses.replace(ms, row_cost=np.array([0.0, h, 0.0]), row_step=np.array([0, s, 0]))
    exact = ms.to_cascade(models, np.array(K), lenience).ewif(11)
    assert replay(ms, models, K, lenience).speedup == pytest.approx(exact, rel=1e-12)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    st.sampled_from([0.3, 0.6, 0.85]),
    st.sampled_from([0.2, 0.5]),
    st.sampled_from([[[3]], [[2, 1], [0, 2]], [[1, 2], [0, 0]], [[2, 0], [0, 3]]]),
    st.integers(4, 12),
)
def test_constant_probabilities_are_the_iid_monte_carlo(a0, a1, K, n) -> None:
    """Traces of constant probabilities make every test an independent draw, so the replay is
    a Monte Carlo of the i.i.d. theory: the exact E[C(n)] (Theorem FL) lies in its 99.9 %
    interval (200 prompts × 10 replays, seeded; the target's row one α, the drafter's one α,
    so a token's origin and its block's drafter have the same acceptance)."""
    models = ("t", "d") if len(K) == 1 else NAMES
    ms = _model_set(_traces({(1.0, 0, 1): a0, (1.0, 0, 2): a0, (1.0, 1, 2): a1}, 200, n))
    cascade = ms.to_cascade(models, np.array(K))
    result = replay(ms, models, K, repeats=10, seed=n)
    mean, sd = result.cost.mean(), result.cost.std(ddof=1)
    assert abs(mean - cascade.ewif(n) ** -1 * n) <= 3.2905 * sd / math.sqrt(200) + 1e-12


def test_clustered_traces_by_hand() -> None:
    """α = 0.5 as runs of 8 accepts and 8 rejects: SD k = 4 makes, per 16 positions, a step of
    5 tokens, one of 4 (3 accepted, then the correction at the first reject) and 7 steps of
    one token — 36 steps of cost c₀(5) + 4·c₁(1) for 64 tokens, 7 % below the i.i.d. theory's
    speed-up at the same α (a draft after a rejection starts in the rejecting run)."""
    run = np.tile(np.r_[np.ones(8), np.zeros(8)], 4)
    traces = {key: (run,) * 2 for key in [(1.0, 0, 1), (1.0, 0, 2), (1.0, 1, 2)]}
    ms = _model_set(traces, catch_up=(False, False, False))
    result = replay(ms, ("t", "d"), [[4]])
    np.testing.assert_allclose(result.cost, 36 * (1.6 + 4 * 0.3), rtol=1e-12)
    iid = ms.to_cascade(("t", "d"), np.array([[4]])).ewif(run.size)
    assert result.speedup < 0.95 * iid


def test_interval_contains_the_point_and_widens_for_held_out() -> None:
    rng = np.random.default_rng(0)
    traces = {
        key: tuple(rng.binomial(1, rng.beta(3, 2), 32).astype(float) for _ in range(10))
        for key in [(1.0, 0, 1), (1.0, 0, 2), (1.0, 1, 2)]
    }
    result = replay(_model_set(traces), ("t", "d"), [[3]])
    low, high = result.interval()
    held_low, held_high = result.interval(held_out_prompts=10)
    assert low <= result.speedup <= high
    assert held_high - held_low > high - low
    assert result.interval() == (low, high)  # seeded


def _with_stderr(ms: model_io.ModelSet, share: float) -> model_io.ModelSet:
    """``ms`` with every cost-curve point's standard error ``share`` of the point."""
    data = ms.bootstrap
    stderr = tuple(share * np.asarray(c) for c in ms.cost_curve)
    traces = data.acceptance_traces
    return dataclasses.replace(
        ms, bootstrap=BootstrapData(data.acceptance_by_prompt, stderr, traces)
    )


def test_interval_draws_the_costs_as_the_exact_interval_does() -> None:
    """All-accept traces on identical prompts leave the costs as the only uncertainty: the
    replay's interval is then the exact EWIF's bootstrap interval of generations of the
    traces' length (same draws: prompts, one normal per model, one for the unit)."""
    keys = [(1.0, 0, 1), (1.0, 0, 2), (1.0, 1, 2)]
    ms = _with_stderr(_model_set(_traces(dict.fromkeys(keys, 1.0), 6, 20)), 0.04)
    config = (("t", "d", "mag"), [[2, 1], [0, 2]])
    found = replay(ms, *config)
    exact = prediction_interval(ms, *config, max_new_tokens=20)
    assert found.speedup == pytest.approx(exact.point, rel=1e-12)
    assert found.interval() == pytest.approx((exact.low, exact.high), rel=1e-12)
    assert exact.high - exact.low > 0.02  # the costs' errors are in it


def test_cost_errors_widen_the_interval_and_reprice_the_same_passes() -> None:
    rng = np.random.default_rng(1)
    traces = {
        key: tuple(rng.binomial(1, rng.beta(3, 2), 32).astype(float) for _ in range(10))
        for key in [(1.0, 0, 1), (1.0, 0, 2), (1.0, 1, 2)]
    }
    plain = replay(_model_set(traces), ("t", "d", "mag"), [[2, 1], [0, 2]])
    noisy = replay(_with_stderr(_model_set(traces), 0.05), ("t", "d", "mag"), [[2, 1], [0, 2]])
    assert noisy.speedup == plain.speedup
    low, high = plain.interval()
    noisy_low, noisy_high = noisy.interval()
    assert noisy_high - noisy_low > high - low
    idx = rng.integers(0, 10, 10)
    again = noisy.tokens[idx].sum() * noisy.unit / noisy.cost[idx].sum()
    assert noisy.priced_speedup(idx, noisy.model_set.cost_curve) == pytest.approx(again, rel=1e-12)


def test_bad_input() -> None:
    traces = _traces({(1.0, 0, 1): 0.5, (1.0, 0, 2): 0.5, (1.0, 1, 2): 0.5}, 2, 4)
    ms = _model_set(traces)
    plain = model_io.ModelSet(
        ms.models, ms.cost, ms.cost_per_token, ms.alpha, cost_curve=ms.cost_curve
    )
    with pytest.raises(ValueError, match="no acceptance traces"):
        replay(plain, ("t", "d"), [[2]])
    lenient = dataclasses.replace(ms, alpha={1.0: ms.alpha[1.0], 3.0: ms.alpha[1.0].copy()})
    with pytest.raises(ValueError, match=r"no acceptance traces of 3,1,2 .* at lenience 3"):
        replay(lenient, NAMES, [[2, 0], [0, 2]], 3.0)
    with pytest.raises(ValueError, match="repeats"):
        replay(ms, ("t", "d"), [[2]], repeats=0)
    by_prompt = {k: np.array([[a.sum(), a.size] for a in v]) for k, v in traces.items()}
    bad = dict(traces)
    bad[(1.0, 0, 1)] = (np.array([1.0, 1.0, 1.0, 1.0]), traces[(1.0, 0, 1)][1])
    with pytest.raises(ValueError, match=r"acceptance_traces\['1,0,1'\]\[0\] must have 4"):
        BootstrapData(by_prompt, None, bad)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        BootstrapData(by_prompt, None, {(1.0, 0, 1): (np.full(4, 2.0), np.full(4, 0.5))})
    with pytest.raises(ValueError, match="acceptance_traces must map"):
        BootstrapData.from_dict(
            {"acceptance_by_prompt": {"1,0,1": [[2, 4], [2, 4]]}, "acceptance_traces": [1]}
        )
    round_trip = BootstrapData.from_dict(ms.bootstrap.to_dict())
    assert round_trip.acceptance_traces.keys() == ms.bootstrap.acceptance_traces.keys()
