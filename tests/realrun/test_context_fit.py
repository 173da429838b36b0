"""realrun.context_fit: c(m, L) fitted from the timing rounds' context lengths."""

from __future__ import annotations

import numpy as np
import pytest

from realrun.context_fit import (
    MIN_SPAN,
    WALD_THRESHOLD,
    combined_slope,
    fit_context_cost,
    pass_slopes,
)
from realrun.timing import FamilyTiming, PassTiming

MS = (1, 2, 3, 4, 6, 8)


def timing(contexts, u, w, noise=0.0, seed=0):
    """Pass times a(m) + (L − L̄)(u + w·m) (+ noise) of one model in rounds at ``contexts``."""
    rng = np.random.default_rng(seed)
    L = np.asarray(contexts, dtype=float)
    samples = [
        [0.1 * m + (x - L.mean()) * (u + w * m) + noise * rng.standard_normal() for x in L]
        for m in MS
    ]
    return PassTiming.of(MS, samples)


def test_recovers_the_per_pass_and_per_position_slopes():
    contexts = [110, 850, 300, 620, 140, 990, 400, 200, 760, 520]
    u, w, se_u, *_ = pass_slopes(contexts, timing(contexts, 7e-5, 2e-6).samples, MS)
    assert (u, w) == pytest.approx((7e-5, 2e-6), rel=1e-9) and se_u < 1e-12
    noisy = pass_slopes(contexts, timing(contexts, 7e-5, 2e-6, noise=1e-3).samples, MS)
    assert noisy[0] == pytest.approx(7e-5, abs=4 * noisy[2]) and noisy[2] > 0


def test_the_fitted_key_in_ar_units():
    contexts = (110, 850, 300, 620, 140, 990)
    family = FamilyTiming(
        {"t": timing(contexts, 7e-5, 2e-6), "d": timing(contexts, 3e-5, 1e-6)},
        None,
        ar_tokens=(32, 32, 10, 32, 32, 32),
        ar_seconds=(3.2, 3.3, 1.1, 3.1, 3.3, 3.2),  # no slope of their own: the target's stands in
        contexts=contexts,
        ar_contexts=(100, 800, 280, 600, 120, 960),
    )
    unit = 0.1
    curves = (np.ones(8), np.full(8, 0.4), np.array([0.01]))
    cost, record = fit_context_cost(family, ("t", "d", "mag"), curves, unit)
    np.testing.assert_allclose(cost.slope[0], (7e-5 + 2e-6 * np.arange(1, 9)) / unit)
    np.testing.assert_allclose(cost.slope[1], (3e-5 + 1e-6 * np.arange(1, 9)) / unit)
    assert cost.slope[2].tolist() == [0.0] and cost.ar_slope == pytest.approx(7.2e-4)
    assert cost.tokens == pytest.approx(np.mean(contexts))
    mid = np.array([116, 816, 285, 616, 136, 976])
    n = np.array(family.ar_tokens)
    assert cost.ar_tokens == pytest.approx((n * mid).sum() / n.sum())
    assert cost.span == (110.0, 990.0)
    assert record["t"]["per_pass_s"] == pytest.approx(7e-5)
    assert record["autoregressive_direct_s"] is not None
    assert record["ar_slope_from"].startswith("autoregressive generations and target")
    assert record["target_one_token_stderr"] < 1e-3 * record["autoregressive_direct_stderr"]


def test_the_ar_token_moves_as_the_generations_do():
    """AR generations whose seconds per token grow with their context faster than the target's
    one-token pass (transformers' generate rebuilds a mask over the context every step): the
    AR token's slope is theirs; with no pass slope at all the fit still holds it."""
    contexts = (110, 850, 300, 620, 140, 990)
    prompts = (100, 800, 280, 600, 120, 960)
    n = np.array([32, 32, 10, 32, 32, 32])
    mid = np.array(prompts) + n / 2
    per_token = 0.1 + 3e-5 * (mid - 500)
    family = FamilyTiming(
        {"t": timing(contexts, 0.0, 0.0, noise=1e-3, seed=4)},
        None,
        ar_tokens=tuple(n),
        ar_seconds=tuple(n * per_token),
        contexts=contexts,
        ar_contexts=prompts,
    )
    cost, record = fit_context_cost(family, ("t", "mag"), (np.ones(8), np.zeros(1)), 0.1)
    assert record["ar_slope_from"] == "autoregressive generations"
    assert record["autoregressive_direct_s"] == pytest.approx(3e-5)
    assert cost is not None and cost.ar_slope == pytest.approx(3e-4)
    assert all(not s.any() for s in cost.slope)
    assert cost.unit_at(cost.ar_tokens + 400) == pytest.approx(1.12)


def test_no_fit_without_a_spread_of_contexts():
    flat = (100, 100 + MIN_SPAN - 1, 110)
    family = FamilyTiming({"t": timing(flat, 7e-5, 0)}, None, (8,) * 3, (0.8,) * 3, contexts=flat)
    assert fit_context_cost(family, ("t", "mag"), (np.ones(8), np.zeros(1)), 0.1) is None
    two = (100, 900)
    few = FamilyTiming({"t": timing(two, 7e-5, 0)}, None, (8,) * 2, (0.8,) * 2, contexts=two)
    assert fit_context_cost(few, ("t", "mag"), (np.ones(8), np.zeros(1)), 0.1) is None


def test_slopes_within_noise_are_dropped():
    """Pass times that do not move with the context (noise only): no slope survives, and the
    fit says so with its figures instead of pricing noise."""
    contexts = (110, 850, 300, 620, 140, 990, 400, 200)
    family = FamilyTiming(
        {"t": timing(contexts, 0.0, 0.0, noise=5e-3, seed=3)},
        None,
        (32,) * 8,
        (3.2,) * 8,
        contexts=contexts,
        ar_contexts=contexts,
    )
    cost, record = fit_context_cost(family, ("t", "mag"), (np.ones(8), np.zeros(1)), 0.1)
    assert cost is None
    assert record["t"]["wald"] < WALD_THRESHOLD and record["t"]["kept"] is False


def test_slopes_are_kept_together_when_jointly_clear():
    """A per-pass slope with no per-position one, in noise: each term's own t may be small
    (the two columns are correlated) while the pair is clear, so both are kept and their sum
    at m = 1 is near the truth; pure noise keeps neither."""
    contexts = [110, 850, 300, 620, 140, 990, 400, 200, 760, 520] * 2
    u, w, se_u, se_w, wald = pass_slopes(contexts, timing(contexts, 7e-5, 0.0, 2e-3, 1).samples, MS)
    assert wald >= WALD_THRESHOLD
    assert u + w == pytest.approx(7e-5, abs=3 * (se_u + se_w))
    quiet = pass_slopes(contexts, timing(contexts, 0.0, 0.0, noise=2e-3, seed=2).samples, MS)
    assert quiet[4] < WALD_THRESHOLD


def test_combined_slope_weights_by_precision():
    assert combined_slope([(1.0, 1.0), (4.0, 2.0)]) == pytest.approx((1.6, np.sqrt(0.8)))
    assert combined_slope([(3.0, 0.5)]) == (3.0, 0.5)
    assert combined_slope([(3.0, 0.5), (7.0, 0.0)]) == (7.0, 0.0)
    assert combined_slope([]) == (0.0, float("inf"))


def test_a_noisy_stand_in_does_not_move_the_unit():
    """The trees run's case: the target's per-position slope is clear, so its two slopes are
    kept, but its one-token slope u + w is noise far wider than the generations' own (near 0,
    not significant). Taken alone it moved the unit by tens of percent; weighed by precision the
    AR token gets no slope, and the record says why."""
    contexts = [60, 140, 90, 120, 70, 150, 100, 80, 130, 110]
    family = FamilyTiming(
        {"t": timing(contexts, 0.0, 4e-5, noise=4e-3, seed=5)},
        None,
        ar_tokens=(32,) * 10,
        ar_seconds=tuple(32 * (0.04 + 1e-4 * np.random.default_rng(6).standard_normal(10))),
        contexts=contexts,
        ar_contexts=tuple(c - 16 for c in contexts),
    )
    cost, record = fit_context_cost(family, ("t", "mag"), (np.ones(8), np.zeros(1)), 0.04)
    assert record["t"]["kept"]
    stand_in, direct = record["target_one_token_stderr"], record["autoregressive_direct_stderr"]
    assert stand_in > 3 * direct
    assert record["ar_slope_stderr"] < direct
    assert record["ar_slope_from"] == "none significant" and cost is not None
    assert cost.ar_slope == 0.0 and cost.slope[0].any()


def test_a_kept_pair_is_priced_only_at_the_sizes_it_tells():
    """A per-position slope, clear over the large sizes, with no per-pass slope: the joint
    test keeps the pair, but at m = 1 the slope u + w is within noise and is not priced; at
    the large sizes it is."""
    contexts = [60, 140, 90, 120, 70, 150, 100, 80, 130, 110] * 2
    family = FamilyTiming(
        {"t": timing(contexts, 0.0, 2e-5, noise=4e-3, seed=7)},
        None,
        ar_tokens=(32,) * 20,
        ar_seconds=(3.2,) * 20,
        contexts=contexts,
        ar_contexts=contexts,
    )
    cost, record = fit_context_cost(family, ("t", "mag"), (np.ones(8), np.zeros(1)), 0.1)
    assert record["t"]["kept"] and 0 < record["t"]["sizes_priced"] < 8
    assert cost.slope[0][0] == 0.0 and cost.slope[0][-1] > 0.0
    priced = cost.slope[0] > 0
    assert priced[np.argmax(priced) :].all()  # once told, every larger size is
