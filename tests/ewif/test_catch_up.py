"""The catch-up pass in the exact theory (Theorem CU, :mod:`ewif.kernel.catch_up`): closed forms,
exact brute-force enumeration, invariants, and the optimizer under catch-up."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from ewif.kernel.pass_cost import max_row_cost
from ewif.search.explain import review_sizes
from simulate.fed_positions import FedPositions

CURVES3 = [[1.0, 1.1, 1.25, 1.4, 1.6, 1.7], [0.3, 0.55, 0.6, 0.7], [0.05, 0.09]]


def _counts(c: Cascade, i: int) -> dict[int, float]:
    return {m: float(v) for m, v in enumerate(c.pass_sizes()[i].counts) if v > 1e-15}


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 1.0])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_sd_closed_form(alpha: float, k: int) -> None:
    """Plain SD: the drafter's first pass per step feeds 2 positions exactly when the whole
    draft was accepted in the step before (its last token and the bonus token), else 1;
    k = 1: drafter cost α·c₁(2) + (1 − α)·c₁(1)."""
    curves = [[1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], [0.2, 0.35, 0.4]]
    c = Cascade([[0, alpha], [0, 0]], None, [[k]], cost_curve=curves, catch_up=[False, True])
    full = alpha**k
    expected = {1: k - 1 + 1 - full, 2: full}
    got = _counts(c, 1)
    assert got.keys() <= {1, 2}
    for m in (1, 2):
        assert got.get(m, 0.0) == pytest.approx(expected[m], abs=1e-14)
    drafter = (k - 1) * 0.2 + full * 0.35 + (1 - full) * 0.2
    plain = Cascade([[0, alpha], [0, 0]], None, [[k]], cost_curve=curves)
    target = plain.pass_sizes()[0].total_cost
    assert c.expected_cost() == pytest.approx(target + drafter, rel=1e-14)
    assert c.expected_tokens() == plain.expected_tokens()
    if k == 1:
        assert drafter == pytest.approx(alpha * 0.35 + (1 - alpha) * 0.2, rel=1e-14)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.8, 1.0])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_sd_closed_form_with_row_cost(alpha: float, k: int) -> None:
    """A logit row costs h: the first pass after a fully accepted draft feeds 2 positions
    and returns 1 row, ``c₁(2) − h``; k = 1: α·(c₁(2) − h) + (1 − α)·c₁(1)."""
    curves, h = [[1.0, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], [0.2, 0.35, 0.4]], 0.04
    c = Cascade(
        [[0, alpha], [0, 0]],
        None,
        [[k]],
        cost_curve=curves,
        catch_up=[False, True],
        row_cost=[0.0, h],
    )
    full = alpha**k
    drafter = (k - 1) * 0.2 + full * (0.35 - h) + (1 - full) * 0.2
    assert c.model_step_costs()[1] == pytest.approx(drafter, rel=1e-14, abs=1e-15)
    assert c.catch_up_positions(1) == pytest.approx(full, rel=1e-14, abs=1e-15)
    assert c.logit_rows(1) == pytest.approx(k, rel=1e-14)
    shown = review_sizes(c)  # what `csd recommend` prints per model adds up to the step cost
    assert sum(r["cost"] for r in shown) == pytest.approx(c.expected_cost(), rel=1e-14)
    if k == 1:
        assert drafter == pytest.approx(alpha * (0.35 - h) + (1 - alpha) * 0.2, rel=1e-14)


def test_bad_row_cost() -> None:
    alpha, K = [[0, 0.5], [0, 0]], [[2]]
    curves = [[1.0, 1.1], [0.2, 0.3]]
    with pytest.raises(ValueError, match=r"row_cost must hold finite numbers >= 0, got -0.1"):
        Cascade(alpha, None, K, cost_curve=curves, row_cost=[0, -0.1])
    with pytest.raises(ValueError, match=r"row_cost must hold finite numbers, got \[0, nan\]"):
        Cascade(alpha, None, K, cost_curve=curves, row_cost=[0, float("nan")])
    with pytest.raises(ValueError, match=r"one cost per model \(2\)"):
        Cascade(alpha, None, K, cost_curve=curves, row_cost=[0.1])
    with pytest.raises(ValueError, match=r"row_cost\[1\] = 0.2 exceeds cost_per_token\[1\]"):
        Cascade(alpha, [1, 0.1], K, cost_per_token=[0, 0.1], row_cost=[0, 0.2])
    with pytest.raises(ValueError, match=r"row_cost\[1\] = 0.2 would price model 1's one-row pass"):
        Cascade(alpha, None, K, cost_curve=[[1.0, 1.1], [0.2, 0.3, 0.3]], row_cost=[0, 0.2])
    assert max_row_cost([0.2, 0.3, 0.3]) == pytest.approx(0.15)
    assert max_row_cost([0.2]) == float("inf")
    with pytest.raises(ValueError, match="rows must be at most m"):
        Cascade(alpha, None, K, cost_curve=curves).pass_cost.at_rows(1, 2, 3)


class _More(Exception):
    """The scripted outcomes ran out: the caller branches on the next draw's probability."""


class _Script:
    """Replays fixed acceptance outcomes and multiplies their probabilities."""

    def __init__(self, outcomes: tuple[bool, ...]) -> None:
        self.outcomes, self.weight, self._next = outcomes, 1.0, 0

    def draw(self, p: float) -> bool:
        if self._next == len(self.outcomes):
            raise _More(p)
        v = self.outcomes[self._next]
        self._next += 1
        self.weight *= p if v else 1.0 - p
        return v


def _second_steps(alpha, K, fill, catch_up, price):
    """Every acceptance outcome of two steps of the explicit-sequence player (a warm-up step,
    then the one counted): yields ``(probability, player)`` after the second step."""
    stack: list[tuple[bool, ...]] = [()]
    while stack:
        script = _Script(stack.pop())
        player = FedPositions(alpha, K, fill, catch_up, price, draw=script.draw)
        try:
            seq = player.start()
            player.step(seq)
            player.step(seq)
        except _More as more:
            p = more.args[0]
            stack += [(*script.outcomes, v) for v, q in ((True, p), (False, 1 - p)) if q > 0]
            continue
        yield script.weight, player


def _brute_force(alpha, K, fill, catch_up, price) -> list[dict[int, float]]:
    """Exact expected passes by m of the second step, every outcome enumerated."""
    totals: list[dict[int, float]] = [{} for _ in range(len(K) + 1)]
    for weight, player in _second_steps(alpha, K, fill, catch_up, price):
        for i, counts in enumerate(player.step_sizes):
            for m, n in counts.items():
                totals[i][m] = totals[i].get(m, 0.0) + weight * n
    return totals


BRUTE = [
    ([[0, 0.6], [0, 0]], [[3]], "tokens"),
    ([[0, 0.7, 0.5], [0, 0, 0.6], [0, 0, 0]], [[2, 0], [0, 2]], "tokens"),
    ([[0, 0.7, 0.5], [0, 0, 0.6], [0, 0, 0]], [[2, 1], [0, 2]], "tokens"),
    ([[0, 0.7, 0.5], [0, 0, 0.6], [0, 0, 0]], [[2, 1], [0, 2]], "rounds"),
    ([[0, 0.7, 0.5], [0, 0, 0.6], [0, 0, 0]], [[1, 2], [0, 0]], "tokens"),
]


def _brute_force_step_cost(alpha, K, fill, catch_up, price) -> float:
    """Exact expected cost of the second step, every outcome enumerated."""
    return sum(w * player.step_cost for w, player in _second_steps(alpha, K, fill, catch_up, price))


@pytest.mark.parametrize("alpha,K,fill", BRUTE)
@pytest.mark.parametrize("s", [0.0, 0.02])
def test_row_cost_matches_brute_force_enumeration(alpha, K, fill, s: float) -> None:
    """With a row cost (and a row step ``s``), E[cost per step] equals the enumeration of the
    player, which prices every pass at ``c(m) − h·(m − rows) − s·[m >= 2, rows = 1]`` with
    the rows it asks for, to 1e-12 (Theorem CU, row step)."""
    n = len(K)
    flags = [False] + [True] * n
    h = [0.0, 0.03, 0.01][: n + 1]
    step = [0.0, s, s][: n + 1]
    curves = CURVES3[: n + 1]
    c = Cascade(
        alpha, None, K, cost_curve=curves, fill=fill, catch_up=flags, row_cost=h, row_step=step
    )
    price = lambda i, m, rows: float(c.pass_cost.at_rows(i, m, rows))  # noqa: E731
    assert c.expected_cost() == pytest.approx(
        _brute_force_step_cost(alpha, K, fill, flags, price), rel=1e-12
    )
    assert c.expected_cost() < c.with_row_cost(None).expected_cost()
    if s:  # the step is priced: some one-row pass feeds m >= 2 in these configurations
        assert c.expected_cost() < c.with_row_cost(h).expected_cost()


@pytest.mark.parametrize("alpha,K,fill", BRUTE)
def test_matches_brute_force_enumeration(alpha, K, fill) -> None:
    """Every model's expected passes by m equal the exact enumeration to 1e-12."""
    n = len(K)
    flags = [False] + [True] * n
    c = Cascade(alpha, None, K, cost_curve=CURVES3[: n + 1], fill=fill, catch_up=flags)
    brute = _brute_force(alpha, K, fill, flags, lambda i, m, rows: 0.0)
    for i in range(n + 1):
        exact = _counts(c, i)
        assert exact.keys() == {m for m, v in brute[i].items() if v > 1e-15}
        for m, v in exact.items():
            assert v == pytest.approx(brute[i][m], abs=1e-12)


@st.composite
def cascades(draw, max_models: int = 4, max_budget: int = 3):
    n = draw(st.integers(1, max_models - 1))
    alpha = np.zeros((n + 1, n + 1))
    for r in range(n + 1):
        for j in range(r + 1, n + 1):
            alpha[r, j] = draw(st.sampled_from([0.0, 0.2, 0.5, 0.8, 0.95, 1.0]))
    K = np.zeros((n, n), dtype=int)
    for r in range(n):
        for j in range(r, n):
            K[r, j] = draw(st.integers(0, max_budget))
    K[0, n - 1] = max(K[0, n - 1], 1)
    for j in range(1, n):  # every drafter reached: a reviewer above it gives it a budget
        if not K[:j, j - 1].any():
            K[0, j - 1] = 1
    flags = [False] + [draw(st.booleans()) for _ in range(n)]
    fill = draw(st.sampled_from(["tokens", "rounds"]))
    return alpha, K, flags, fill


def _curves(n: int, slope: float = 0.15) -> list[list[float]]:
    return [[1.0 + slope * m for m in range(6)]] + [
        [0.3 / (i + 1) + 0.05 * m for m in range(4)] for i in range(n)
    ]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cascades())
def test_invariants(config) -> None:
    """Catch-up changes no token law and no pass count; passes only grow, so with costs
    non-decreasing in m the EWIF never rises; all-False flags are the paper's accounting."""
    alpha, K, flags, fill = config
    n = K.shape[0]
    plain = Cascade(alpha, None, K, cost_curve=_curves(n), fill=fill)
    cu = Cascade(alpha, None, K, cost_curve=_curves(n), fill=fill, catch_up=flags)
    off = Cascade(alpha, None, K, cost_curve=_curves(n), fill=fill, catch_up=[False] * (n + 1))
    assert off.expected_cost() == plain.expected_cost()
    # a logit row costs at most a position (drafter curves rise 0.05 per m): rows priced, the
    # cost lies between the paper's and the all-rows catch-up cost
    rows = cu.with_row_cost([0.0] + [0.04] * n)
    assert plain.expected_cost() <= rows.expected_cost() * (1 + 1e-12)
    assert rows.expected_cost() <= cu.expected_cost() * (1 + 1e-12)
    assert all(cu.catch_up_positions(i) >= -1e-12 for i in range(n + 1))
    assert off.with_row_cost([0.0] + [0.04] * n).expected_cost() == plain.expected_cost()
    assert cu.expected_tokens() == plain.expected_tokens()
    assert cu.ewif() <= plain.ewif() * (1 + 1e-12)
    for a, b in zip(plain.pass_sizes(), cu.pass_sizes(), strict=True):
        assert b.passes == pytest.approx(a.passes, rel=1e-9, abs=1e-12)
        assert b.mean_m >= a.mean_m - 1e-9 or a.passes == 0
        if not flags[a.model]:
            np.testing.assert_array_equal(a.counts, b.counts)


def test_bad_flags() -> None:
    alpha, K = [[0, 0.5], [0, 0]], [[2]]
    with pytest.raises(ValueError, match="one flag per model"):
        Cascade(alpha, [1, 0.1], K, catch_up=[True])
    with pytest.raises(ValueError, match="booleans"):
        Cascade(alpha, [1, 0.1], K, catch_up=[0, 1])
    with pytest.raises(ValueError, match="booleans"):
        Cascade(alpha, [1, 0.1], K, catch_up="yes")


@pytest.mark.parametrize("fill", ["tokens", "rounds"])
@pytest.mark.parametrize("h", [0.01, 0.06])
def test_optimizer_matches_brute_force_with_row_cost(fill: str, h: float) -> None:
    """Row costs priced: the best-first search (its bound ``h·r + min_{m >= r}(c(m) − h·m)``)
    still returns the brute-force top 5, also when a row costs more than some increments of
    the measured curve (h = 0.06 > 0.02, 0.03)."""
    import itertools

    from ewif.files.model_set import ModelSet
    from ewif.search.optimizer import optimize

    alpha = np.array([[0, 0.8, 0.55], [0, 0, 0.7], [0, 0, 0]])
    curves = [[1.0, 1.02, 1.05, 1.3, 1.5, 1.9], [0.25, 0.4, 0.42, 0.45], [0.02, 0.03]]
    flags = (False, True, False)
    ms = ModelSet(
        models=("t", "d", "p"),
        cost=np.array([1.0, 0.25, 0.02]),
        cost_per_token=np.zeros(3),
        alpha={1.0: alpha},
        cost_curve=tuple(np.array(c) for c in curves),
        catch_up=flags,
        row_cost=np.array([0.0, h, 0.0]),
    )
    result = optimize(ms, bounds=(1, 5), subsets=False, fill=fill, top=5)
    brute = []
    for k in itertools.product(range(1, 6), repeat=3):
        K = [[k[0], k[1]], [0, k[2]]]
        brute.append(ms.to_cascade(K=K, fill=fill).ewif())
    brute.sort(reverse=True)
    assert [c.ewif for c in result.table] == pytest.approx(brute[:5], rel=1e-12)
    best = ms.to_cascade(K=result.best.K, fill=fill)
    assert best.ewif() > best.with_row_cost(None).ewif()  # the rows not returned are saved


@pytest.mark.parametrize("fill", ["tokens", "rounds"])
@pytest.mark.parametrize("dip", [False, True])
def test_optimizer_matches_brute_force(fill: str, dip: bool) -> None:
    """The best-first search returns the brute-force top 5 under catch-up, also when a
    drafter's measured curve dips (the bound then uses its lower envelope)."""
    import itertools

    from ewif.search.optimizer import optimize

    alpha = np.array([[0, 0.8, 0.55], [0, 0, 0.7], [0, 0, 0]])
    drafter = [0.25, 0.2, 0.42, 0.45] if dip else [0.25, 0.4, 0.42, 0.45]
    curves = [[1.0, 1.02, 1.05, 1.3, 1.5, 1.9], drafter, [0.02, 0.03]]
    flags = [False, True, False]
    result = optimize(
        alpha, cost_curve=curves, bounds=(1, 5), subsets=False, fill=fill, top=5, catch_up=flags
    )
    brute = []
    for k in itertools.product(range(1, 6), repeat=3):
        K = [[k[0], k[1]], [0, k[2]]]
        brute.append(Cascade(alpha, None, K, cost_curve=curves, fill=fill, catch_up=flags).ewif())
    brute.sort(reverse=True)
    assert [c.ewif for c in result.table] == pytest.approx(brute[:5], rel=1e-12)
    assert result.cascade().ewif() == pytest.approx(brute[0], rel=1e-12)
    plain = optimize(alpha, cost_curve=curves, bounds=(1, 3), subsets=False, fill=fill, top=1)
    assert plain.best.ewif >= result.best.ewif
    with pytest.raises(ValueError, match="dinkelbach"):
        optimize(alpha, cost_curve=curves, bounds=(1, 3), method="dinkelbach", catch_up=flags)
