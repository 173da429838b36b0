"""The vectorised Bernoulli Monte Carlo against the exact ``ewif.Cascade``.

Confidence levels: every interval is two-sided 99.9 % (z = 3.29); χ² tests reject at
p < 0.001. Seeds are fixed (hypothesis runs derandomized, ``simulate`` gets ``seed=``),
so every outcome is reproducible; the per-example false-alarm rate is ≈ 0.2 %.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from ewif.theory.theorems import phi
from ewif.theory.theorems import review as review_pgf
from simulate.bernoulli import CascadeSpec, IidAcceptance, simulate
from simulate.compare import compare_with_exact
from simulate.loop_reference import simulate_loop
from simulate.stats import chi_square_gof

LEVEL = 0.999


def _alpha(draw: st.DrawFn) -> float:
    """Mostly interior values, with the exact edges 0 and 1 about one time in ten each."""
    u = draw(st.floats(0.0, 1.0))
    return 0.0 if u < 0.1 else 1.0 if u > 0.9 else 0.05 + 0.9 * (u - 0.1) / 0.8


@st.composite
def cascades(draw: st.DrawFn, n: int) -> Cascade:
    """Random valid configurations of ``n`` drafters: budgets 0–4, any alphas and costs."""
    K = np.zeros((n, n), dtype=int)
    for r in range(n):
        for c in range(r, n):
            K[r, c] = draw(st.sampled_from([0, 0, 1, 2, 3, 4]))
    # Every drafter must be asked for tokens by a reviewer that is itself reached.
    used, reached = set(), {0}
    for r in range(n):
        if r in reached:
            for j in range(r + 1, n + 1):
                if K[r, j - 1]:
                    used.add(j)
                    if j < n and K[j].any():
                        reached.add(j)
    for j in range(1, n + 1):
        if j not in used:
            K[0, j - 1] = draw(st.integers(1, 3))
    alpha = np.full((n + 1, n + 1), np.nan)
    for r in range(n + 1):
        for j in range(r + 1, n + 1):
            # The target's row stays interior (an edge there makes every step alike).
            alpha[r, j] = draw(st.floats(0.05, 0.95)) if r == 0 else _alpha(draw)
    cost = np.concatenate([[1.0], [draw(st.floats(0.0, 0.2)) for _ in range(n)]])
    cpt = np.array([draw(st.sampled_from([0.0, 0.01, 0.05])) for _ in range(n + 1)])
    fill = draw(st.sampled_from(["tokens", "rounds"]))
    return Cascade(alpha, cost, K, cost_per_token=cpt, fill=fill)


@pytest.mark.parametrize("depth", [1, 2, 3])
@settings(max_examples=15)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_random_cascades_agree_with_exact_theory(depth: int, data: st.DataObject, seed: int):
    cascade = data.draw(cascades(depth), label="cascade")
    comparison = compare_with_exact(cascade, trials=20_000, seed=seed, level=LEVEL)
    result = comparison.result
    # Exact EWIF inside the simulated 99.9 % delta-method interval.
    assert result.ewif(LEVEL).contains(cascade.ewif()), comparison.row("ewif")
    # Tokens per step: χ² against tokens_pgf() at significance 0.001.
    assert not comparison.chi_square.rejects(LEVEL), comparison.chi_square
    # Every other quantity (calls, cost, per-position acceptance), Bonferroni at 0.999.
    assert comparison.agrees(LEVEL), [r for r in comparison.rows if abs(r.z) > 3.29]


def _theorem_4_3(alpha: float, alpha2: float, k: int, n: int) -> Cascade:
    """Theorem 4.3's setting: n review rounds of d1 over k-token drafts of d2, then the target."""
    a = np.full((3, 3), np.nan)
    a[0, 1], a[1, 2] = alpha, alpha2
    return Cascade(a, [1.0, 0.1, 0.01], [[n, 0], [0, k]], fill="rounds")


@pytest.mark.parametrize(("alpha", "alpha2", "k", "n"), [(0.8, 0.7, 3, 3), (0.6, 0.9, 2, 4)])
def test_composition_formula_is_rejected_power_is_not(alpha, alpha2, k, n) -> None:
    """The check can fail: the composition reading φ^∘n of Theorem 4.3 is rejected.

    Draft length of n rounds has PGF φ(x)^n (independent rounds: a power); the composition
    reading takes φ^n as n-fold composition. The target's tokens then have PGF review(α, ·)
    of either.
    """
    cascade = _theorem_4_3(alpha, alpha2, k, n)
    result = simulate(cascade, trials=50_000, seed=43)
    counts = result.token_counts()
    one_round = phi(alpha2, k)
    power = review_pgf(alpha, one_round**n)
    composed = one_round
    for _ in range(n - 1):
        composed = one_round.compose(composed)
    wrong = review_pgf(alpha, composed)
    assert power.isclose(cascade.tokens_pgf(), atol=1e-12)
    assert not chi_square_gof(counts, power.coefficients).rejects(LEVEL)
    assert chi_square_gof(counts, cascade.tokens_pgf().coefficients).p_value > 1e-3
    wrong_fit = chi_square_gof(counts, wrong.coefficients)
    assert wrong_fit.rejects(LEVEL) and wrong_fit.p_value < 1e-6, wrong_fit


def _three_drafters(fill: str = "tokens") -> Cascade:
    a = np.full((4, 4), np.nan)
    a[0, 1:] = [0.8, 0.7, 0.5]
    a[1, 2:] = [0.85, 0.6]
    a[2, 3] = 0.65
    return Cascade(
        a,
        [1.0, 0.1, 0.03, 0.0],
        [[2, 2, 5], [0, 3, 5], [0, 0, 5]],
        cost_per_token=[0.01, 0.002, 0.0, 0.001],
        fill=fill,
    )


@pytest.mark.parametrize("fill", ["tokens", "rounds"])
def test_plain_loop_reference_agrees_with_exact_theory(fill: str) -> None:
    cascade = _three_drafters(fill)
    loop = simulate_loop(cascade, 6_000, seed=5)
    comparison = compare_with_exact(cascade, result=loop)
    assert loop.ewif(LEVEL).contains(cascade.ewif())
    assert comparison.agrees(LEVEL)


def test_reproducible_for_a_seed_and_different_across_seeds() -> None:
    cascade = _three_drafters()
    a = simulate(cascade, 5_000, seed=11, batch_size=1000)
    b = simulate(cascade, 5_000, seed=11, batch_size=1000)
    c = simulate(cascade, 5_000, seed=12, batch_size=1000)
    assert np.array_equal(a.token_counts(), b.token_counts())
    assert a.expected_cost().value == b.expected_cost().value
    assert not np.array_equal(a.token_counts(), c.token_counts())


def test_edges_alpha_zero_and_one_are_exact() -> None:
    a = np.full((3, 3), np.nan)
    a[0, 1], a[0, 2], a[1, 2] = 1.0, 1.0, 0.0
    cascade = Cascade(a, [1.0, 0.2, 0.0], [[2, 3], [0, 4]])
    r = simulate(cascade, 1_000, seed=0)
    # 68M-like drafter d1 reviewing 4 MaG tokens it always rejects: 1 token per call, 2
    # calls fill its block; the target accepts all 2 + 3 tokens and adds one.
    assert np.array_equal(r.token_counts(), np.r_[np.zeros(6), 1_000])
    assert r.ewif().se == 0.0 and r.ewif().value == pytest.approx(cascade.ewif(), rel=1e-14)
    assert [e.value for e in r.passes_per_step()] == pytest.approx(
        list(cascade.passes_per_step()), rel=1e-14
    )
    curve = r.acceptance_by_position(6)
    assert curve.p.tolist() == [1, 1, 1, 1, 1, 0]


def test_per_position_curve_and_wilson_intervals() -> None:
    a = np.array([[np.nan, 0.7], [np.nan, np.nan]])
    cascade = Cascade(a, [1.0, 0.05], [[6]])
    r = simulate(cascade, 40_000, seed=3)
    curve = r.acceptance_by_position(8)
    exact = cascade.acceptance_by_position(8)
    assert np.all((curve.low <= exact) & (exact <= curve.high))
    assert curve.p[6:].tolist() == [0.0, 0.0]
    cond = r.acceptance_by_position(6, conditional=True)
    assert np.all((cond.low <= 0.7) & (0.7 <= cond.high))


def test_ctrl_c_returns_partial_results() -> None:
    cascade = _three_drafters()
    spec = CascadeSpec.of(cascade)

    class Interrupting(IidAcceptance):
        calls = 0

        def accepted(self, *args):
            type(self).calls += 1
            if type(self).calls > 200:
                raise KeyboardInterrupt
            return super().accepted(*args)

    r = simulate(cascade, 10**6, seed=0, batch_size=500, acceptance=Interrupting(spec.alpha))
    assert r.interrupted and 0 < r.trials < 10**6 and r.trials % 500 == 0
    assert r.ewif().value > 0


def test_bad_input() -> None:
    with pytest.raises(TypeError, match=r"ewif\.Cascade"):
        simulate(object(), 100)
    with pytest.raises(ValueError, match="trials"):
        simulate(_three_drafters(), 1)
    with pytest.raises(ValueError, match="batch_size"):
        simulate(_three_drafters(), 100, batch_size=0)
    with pytest.raises(ValueError, match="max_position"):
        simulate(_three_drafters(), 100).acceptance_by_position(0)
