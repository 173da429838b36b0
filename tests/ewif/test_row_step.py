"""The row step of the logit rows (:mod:`ewif.kernel.pass_cost`, "Row step"; Theorem CU, row
step, :mod:`ewif.kernel.catch_up`): the pass price, its bounds, ``s = 0`` leaves every number
as it was, closed forms, the Monte Carlo witness priced independently
(:class:`simulate.prices.Prices`), the model-set file and the catch-up search's bound."""

from __future__ import annotations

import dataclasses
import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.base.row_cost import max_row_step
from ewif.files import model_set as model_io
from ewif.files.categories import parse_mix
from ewif.kernel.cascade import Cascade
from ewif.kernel.catch_up import stationary_tail
from ewif.kernel.pass_cost import PassCost
from ewif.kernel.tree import Tree
from ewif.kernel.tree_cascade import TreeCascade
from ewif.predict.bootstrap import replicate_sets
from ewif.predict.context import at_context
from ewif.predict.mix import mix_intervals
from ewif.search.catch_up_search import bounding_set
from simulate.fed_positions import FedPositions
from simulate.prices import Prices
from tests.ewif.test_catch_up import BRUTE, CURVES3, _curves, cascades
from tests.ewif.test_context_cost import data
from tests.ewif.test_mix import SETS, category_set

Z999 = 3.29  # two-sided 99.9 % normal quantile
#: The 0.5B drafter's measured shape (ms): m = 4 costs 49.8 / 59.3 / 59.8 / 61.1 for 1..4 rows
SHAPE = [[1.0, 1.1, 1.2, 1.3], [0.40, 0.45, 0.50, 0.611]]


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    st.integers(1, 9),
    st.integers(1, 9),
    st.sampled_from([0.0, 0.01, 0.05]),
    st.sampled_from([0.0, 0.02, 0.1]),
)
def test_at_rows_is_the_step_formula(m: int, rows: int, h: float, s: float) -> None:
    """``c(m) − h·(m − r) − s·[m >= 2, r = 1]`` = ``c(m) − (ρ(m) − ρ(r))`` with ``ρ(1) = 0``,
    ``ρ(r) = s + h·(r − 1)``; the witnesses' price list agrees to the last bit."""
    rows = min(rows, m)
    pc = PassCost.from_curves(SHAPE, row_cost=[0.0, h], row_step=[0.0, s])

    def rho(r: int) -> float:
        return 0.0 if r == 1 else s + h * (r - 1)

    expected = float(pc.at(1, m)) - (rho(m) - rho(rows))
    assert float(pc.at_rows(1, m, rows)) == pytest.approx(expected, abs=1e-15)
    assert float(Prices.from_curves(SHAPE, [0.0, h], [0.0, s]).at_rows(1, m, rows)) == float(
        pc.at_rows(1, m, rows)
    )
    assert float(pc.at_rows(1, m, rows)) >= 0.0
    np.testing.assert_array_equal(pc.row_step, [0.0, s])


def test_measured_shape_is_priced() -> None:
    """The step the linear price misses (docs/findings.md, "Logit rows are a step"): with
    ``h`` the later rows' mean and ``s`` the second row's excess, a pass over m = 4 returning
    1..4 rows (49.8 / 59.3 / 59.8 / 61.1 ms) is priced within 0.5 ms of its times; the
    linear price of the same ``h`` misses the one-row pass by ``s``, and the linear price
    of the row timed at m = 2 (7.3 ms) misses the two-row pass by over 10 ms."""
    ms = [49.8, 59.3, 59.8, 61.1]
    h, s = (ms[3] - ms[1]) / 2, ms[1] - ms[0] - (ms[3] - ms[1]) / 2
    curves = [[1.0], [45.0, 53.6, 53.5, ms[3]]]
    stepped = PassCost.from_curves(curves, row_cost=[0, h], row_step=[0, s])
    assert [float(stepped.at_rows(1, 4, r)) for r in (1, 2, 3, 4)] == pytest.approx(ms, abs=0.5)
    linear = PassCost.from_curves(curves, row_cost=[0, h])
    assert float(linear.at_rows(1, 4, 1)) - float(stepped.at_rows(1, 4, 1)) == pytest.approx(s)
    timed = PassCost.from_curves(curves, row_cost=[0, 7.3])
    assert ms[1] - float(timed.at_rows(1, 4, 2)) > 10.0


def test_bad_row_step() -> None:
    """Negative, non-finite, wrong length, or large enough to price a one-row pass below 0."""
    curves = [[1.0, 1.1], [0.2, 0.3, 0.3]]
    with pytest.raises(ValueError, match=r"row_step must hold finite numbers >= 0, got -0.1"):
        PassCost.from_curves(curves, row_step=[0, -0.1])
    with pytest.raises(ValueError, match=r"row_step must hold finite numbers, got \[0, nan\]"):
        PassCost.from_curves(curves, row_step=[0, float("nan")])
    with pytest.raises(ValueError, match=r"row_step must hold one cost per model \(2\)"):
        PassCost.from_curves(curves, row_step=[0.1])
    # c(m) − h·(m − 1) = 0.3 − 0.1, 0.3 − 0.2: at most 0.1
    assert max_row_step([0.2, 0.3, 0.3], 0.1) == pytest.approx(0.1)
    with pytest.raises(ValueError, match=r"row_step\[1\] = 0.15 would price model 1's one-row"):
        PassCost.from_curves(curves, row_cost=[0, 0.1], row_step=[0, 0.15])
    with pytest.raises(ValueError, match=r"it must be at most 0.1\b"):
        Cascade(
            [[0, 0.5], [0, 0]], None, [[1]], cost_curve=curves, row_step=[0, 0.2], row_cost=[0, 0.1]
        )
    # affine: c(2) − h = 0.1 + 0.2 − 0.05
    with pytest.raises(ValueError, match=r"row_step\[1\] = 0.3 .* at most 0.25"):
        PassCost.affine([1, 0.1], [0, 0.1], row_cost=[0, 0.05], row_step=[0, 0.3])
    edge = PassCost.affine([1, 0.1], [0, 0.1], [0, 0.05], [0, 0.25])
    assert float(edge.at_rows(1, 2, 1)) == pytest.approx(0.0, abs=1e-15)
    # a one-point curve rises by h: it admits c(1)
    assert max_row_step([0.2], 0.05) == 0.2
    PassCost.from_curves([[1.0], [0.2]], row_cost=[0, 0.05], row_step=[0, 0.2])


@pytest.mark.parametrize("alpha,K,fill", BRUTE)
def test_zero_step_changes_nothing(alpha, K, fill) -> None:
    """``row_step`` zeros (or omitted) gives bit-identical costs, EWIFs and finite-length
    costs, and every ``with_*`` keeps the step."""
    n = len(K)
    flags = [False] + [True] * n
    kw = dict(
        cost_curve=CURVES3[: n + 1], fill=fill, catch_up=flags, row_cost=[0.0, 0.03, 0.01][: n + 1]
    )
    old = Cascade(alpha, None, K, **kw)
    new = Cascade(alpha, None, K, row_step=[0.0] * (n + 1), **kw)
    assert new.expected_cost() == old.expected_cost() and new.ewif() == old.ewif()
    assert new.generation_costs([1, 5, 40]) == old.generation_costs([1, 5, 40])
    np.testing.assert_array_equal(new.model_step_costs(), old.model_step_costs())
    step = [0.0] + [0.01] * n
    stepped = Cascade(alpha, None, K, row_step=step, **kw)
    for c in (stepped.with_alpha(alpha), stepped.with_catch_up(flags)):
        np.testing.assert_array_equal(c.pass_cost.row_step, step)
        assert c.expected_cost() == stepped.expected_cost()
    assert stepped.with_row_cost(None).pass_cost.row_step.tolist() == [0.0] * (n + 1)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 1.0])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_sd_closed_form(alpha: float, k: int) -> None:
    """Plain SD, leaf drafter with catch-up: the first pass feeds 2 positions (one row) after
    a fully accepted draft, so the step saves ``s·α^k`` per step over the linear rows."""
    curves, h, s = [[1.0, 1.2, 1.3, 1.4, 1.5], [0.2, 0.35, 0.4]], 0.04, 0.06
    kw = dict(cost_curve=curves, catch_up=[False, True], row_cost=[0.0, h])
    linear = Cascade([[0, alpha], [0, 0]], None, [[k]], **kw)
    c = Cascade([[0, alpha], [0, 0]], None, [[k]], row_step=[0.0, s], **kw)
    assert c.row_step_passes(1) == pytest.approx(alpha**k, abs=1e-14)
    assert c.expected_cost() == pytest.approx(linear.expected_cost() - s * alpha**k, abs=1e-14)
    if k == 1:
        drafter = alpha * (0.35 - h - s) + (1 - alpha) * 0.2
        assert c.model_step_costs()[1] == pytest.approx(drafter, abs=1e-14)


def test_no_step_for_reviews_or_plain_passes() -> None:
    """A catch-up reviewer's passes return ``D + 1 >= 2`` rows and a model without catch-up
    feeds its rows: neither pays a step less."""
    alpha = [[0, 0.7, 0.5], [0, 0, 0.6], [0, 0, 0]]
    kw = dict(cost_curve=CURVES3, row_cost=[0.0, 0.03, 0.0])
    reviewer = Cascade(alpha, None, [[2, 0], [0, 2]], catch_up=[False, True, False], **kw)
    stepped = reviewer.with_row_cost([0.0, 0.03, 0.0], [0.0, 0.05, 0.05])
    assert stepped.row_step_passes(1) == 0.0 and stepped.row_step_passes(2) == 0.0
    assert stepped.expected_cost() == reviewer.expected_cost()
    leaf = Cascade(alpha, None, [[2, 0], [0, 2]], catch_up=[False, True, True], **kw)
    assert leaf.row_step_passes(2) > 0.0


def _witness_interval(c: Cascade, prices: Prices, streams: int, steps: int, seed: int):
    price = lambda i, m, rows: float(prices.at_rows(i, m, rows))  # noqa: E731
    run = FedPositions(c.alpha, c.K, c.fill, c.catch_up, price, seed=seed).run(streams, steps)
    per_stream = run.cost / run.steps
    return run, float(per_stream.mean()), float(per_stream.std(ddof=1) / math.sqrt(streams))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(cascades(), st.sampled_from([0.0, 0.04]))
def test_cost_per_step_matches_witness(config, h: float) -> None:
    """Theorem CU, row step: depth 1–3 cascades, random catch-up flags, a row step of 0.05 on
    every drafter: exact E[cost per step] lies inside the witness's 99.9 % interval (150
    streams × 12 steps, per-stream means; the witness prices by :class:`Prices`)."""
    alpha, K, flags, fill = config
    n = K.shape[0]
    curves = _curves(n, slope=0.3)
    rows, steps = [0.0] + [h] * n, [0.0] + [0.05] * n
    c = Cascade(
        alpha, None, K, cost_curve=curves, fill=fill, catch_up=flags, row_cost=rows, row_step=steps
    )
    seed = zlib.crc32(repr((alpha.tolist(), K.tolist(), flags, fill, h)).encode())
    run, mean, se = _witness_interval(c, Prices.from_curves(curves, rows, steps), 150, 12, seed)
    rare = (
        6.9
        / (run.steps * run.tokens.size)
        * sum(s.passes * float(c.pass_cost.at(s.model, s.support.max())) for s in c.pass_sizes())
    )
    assert abs(mean - c.expected_cost()) <= Z999 * se + rare


def test_witness_rejects_the_linear_price() -> None:
    """The witness tells the stepped cost from the linear one (so the test above can fail):
    SD k = 1 at α = 0.9, a step worth half the drafter's one-position pass."""
    curves = [[1.0, 1.05, 1.1], [0.2, 0.4, 0.6]]
    c = Cascade(
        [[0, 0.9], [0, 0]],
        None,
        [[1]],
        cost_curve=curves,
        catch_up=[False, True],
        row_cost=[0, 0.1],
        row_step=[0, 0.1],
    )
    _, mean, se = _witness_interval(c, Prices.from_curves(curves, [0, 0.1], [0, 0.1]), 300, 12, 5)
    assert abs(mean - c.expected_cost()) <= Z999 * se
    assert abs(mean - c.with_row_cost([0, 0.1]).expected_cost()) > 10 * se


def _model_set(**changes) -> model_io.ModelSet:
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[0, 2], alpha[1, 2] = 0.7, 0.5, 0.6
    base = model_io.ModelSet(
        models=("t", "d", "mag"),
        cost=np.array([1.0, 0.3, 0.05]),
        cost_per_token=np.zeros(3),
        alpha={1.0: alpha},
        cost_curve=tuple(np.array(c) for c in CURVES3),
        catch_up=(False, True, True),
        row_cost=np.array([0.0, 0.03, 0.01]),
    )
    return dataclasses.replace(base, **changes)


def test_model_set_round_trip(tmp_path) -> None:
    """``row_step`` round-trips through JSON and YAML; a set without it reads as before and
    writes no key; the cascade it builds carries the step."""
    ms = _model_set(row_step=np.array([0.0, 0.02, 0.01]))
    for name in ("set.json", "set.yaml"):
        back = model_io.load(model_io.save(ms, tmp_path / name))
        np.testing.assert_array_equal(back.row_step, [0.0, 0.02, 0.01])
    cascade = ms.to_cascade(K=[[2, 1], [0, 2]])
    np.testing.assert_array_equal(cascade.pass_cost.row_step, [0.0, 0.02, 0.01])
    assert cascade.expected_cost() < _model_set().to_cascade(K=[[2, 1], [0, 2]]).expected_cost()
    assert Prices.of(ms, [0, 2]).row_step.tolist() == [0.0, 0.01]
    plain = _model_set().to_dict()
    assert "row_step" not in plain
    old = model_io.ModelSet.from_dict({**plain, "schema": "csd.models/5"})
    assert old.row_step is None and old.pass_cost.row_step.tolist() == [0.0, 0.0, 0.0]
    assert model_io.ModelSet.from_dict({**plain, "row_step": None}).row_step is None


@pytest.mark.parametrize(
    "bad,match",
    [
        ([0.0, -0.02, 0.0], r"set.json: row_step must hold finite numbers >= 0, got -0.02"),
        ([0.0, 0.02], r"set.json: row_step must hold one cost per model \(3\), got shape \(2,\)"),
        ([0.0, 0.02, 0.5], r"set.json: row_step\[2\] = 0.5 would price model 2's one-row pass"),
        ("0.1", r"set.json: row_step must be a real number, got '0.1'"),
    ],
)
def test_model_set_bad_row_step(bad, match) -> None:
    data = _model_set().to_dict()
    with pytest.raises(ValueError, match=match):
        model_io.ModelSet.from_dict({**data, "row_step": bad}, source="set.json")
    with pytest.raises(ValueError, match=r"row_step needs schema 'csd.models/6'"):
        model_io.ModelSet.from_dict({**data, "schema": "csd.models/5", "row_step": [0, 0, 0]})


@settings(max_examples=25, deadline=None, derandomize=True)
@given(cascades(max_models=3), st.sampled_from([0.0, 0.04]), st.sampled_from([0.03, 0.08]))
def test_search_bound_holds_with_a_step(config, h: float, s: float) -> None:
    """The catch-up search's bounding set (:func:`~ewif.search.catch_up_search.bounding_set`)
    prices every configuration at least as cheaply as its exact catch-up cost with the step,
    for curves and for affine costs."""
    alpha, K, flags, fill = config
    n = K.shape[0]
    matrix = np.where(np.triu(np.ones((n + 1, n + 1)), 1) > 0, alpha, np.nan)
    names = tuple(f"m{i}" for i in range(n + 1))
    curves = tuple(np.array(c) for c in _curves(n))
    rows, steps = np.array([0.0] + [h] * n), np.array([0.0] + [s] * n)
    curved = model_io.ModelSet(
        models=names,
        cost=np.array([c[0] for c in curves]),
        cost_per_token=np.zeros(n + 1),
        alpha={1.0: matrix},
        cost_curve=curves,
        catch_up=tuple(flags),
        row_cost=rows,
        row_step=steps,
    )
    affine = dataclasses.replace(
        curved,
        cost=np.array([1.0] + [0.3 / (i + 1) for i in range(n)]),
        cost_per_token=np.array([0.0] + [0.05] * n),
        cost_curve=None,
    )
    for ms in (curved, affine):
        exact = ms.to_cascade(K=K, fill=fill)
        bound = bounding_set(ms, flags).to_cascade(K=K, fill=fill, catch_up=[False] * (n + 1))
        assert bound.ewif() >= exact.ewif() * (1 - 1e-12)


def test_tree_drafter_steps_only_its_root_pass() -> None:
    """A catch-up drafter growing a tree the target reviews: its root pass feeds the unfed
    tail ``U`` with one row; its level passes return a row per position. So the passes the
    step prices lower are the steps entered with ``U = 2`` (the deepest accepted node a leaf
    other than the root, Theorem TD), ``π(2)``."""
    tree = Tree([-1, 0, 0, 0, 1, 1, 2])
    c = TreeCascade(
        [[0, 0.6], [0, 0]], None, [[6]], cost_curve=[CURVES3[0], [0.1, 0.5, 0.9, 1.3]],
        catch_up=[False, True], rank={(0, 1): [0.6, 0.3, 0.1]}, tree=(0, 1, tree),
        row_cost=[0.0, 0.05], row_step=[0.0, 0.04],
    )  # fmt: skip
    pi = stationary_tail(c.step_feed(1))
    assert pi[2] > 0.1 and c.row_step_passes(1) == pytest.approx(pi[2], abs=1e-14)
    linear = c.with_row_cost([0.0, 0.05])
    assert c.expected_cost() == pytest.approx(linear.expected_cost() - 0.04 * pi[2], abs=1e-14)


def test_replicates_draw_the_row_step_with_the_curves() -> None:
    """The bootstrap draws a drafter's step as it draws its row cost (scaled as the curve's
    two-position pass), never above what the drawn curve and row cost admit; the mix's
    stratified bootstrap draws both alike (it once passed the wrong arguments)."""
    ms = category_set(SETS)
    curve = ms.cost_curve[1]
    h = 0.004
    s = max_row_step(curve, h)  # at the bound: a draw that lowers the curve takes s down
    ms = dataclasses.replace(
        ms, catch_up=(False, True, False), row_cost=np.array([0.0, h, 0.0]),
        row_step=np.array([0.0, s, 0.0]),
    )  # fmt: skip
    reps = replicate_sets(ms, 30)
    for rep in reps:
        limit = max_row_step(rep.cost_curve[1], rep.row_cost[1])
        assert 0.0 <= rep.row_step[1] <= limit + 1e-15
        scaled = s * rep.cost_curve[1][1] / curve[1]
        assert rep.row_step[1] == pytest.approx(min(scaled, limit))
        assert rep.row_step[0] == rep.row_step[2] == 0.0
    assert len({float(rep.row_step[1]) for rep in reps}) > 1
    configs = [(("t", "d"), [[3]], 1.0)]
    (iv,) = mix_intervals(ms, parse_mix("code=0.5,writing=0.5"), configs, replicates=20)
    assert iv.low <= iv.point <= iv.high
    plain = dataclasses.replace(ms, row_step=None)
    (without,) = mix_intervals(plain, parse_mix("code=0.5,writing=0.5"), configs, replicates=20)
    assert iv.point > without.point  # the step makes the catch-up drafter's passes cheaper


def test_a_context_length_scales_the_step() -> None:
    """At a context length the step scales by the unit as the row cost does."""
    ms = model_io.ModelSet.from_dict(data(row_step=[0.0, 0.03, 0.0]))
    long = at_context(ms, 1000.0)
    unit = 1 + 620 * 0.0006
    assert long.row_step[1] == pytest.approx(0.03 / unit)
    assert long.row_step[1] <= max_row_step(long.cost_curve[1], long.row_cost[1])
