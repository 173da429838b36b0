"""The interval and goodness-of-fit helpers of simulate.stats."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sstats

from simulate.stats import (
    batch_ratio_estimate,
    binomial_z,
    chi_square_gof,
    mean_estimate,
    normal_quantile,
    ratio_estimate,
    wilson_interval,
)


@given(st.integers(1, 10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_matches_scipy(kn) -> None:
    k, n = kn
    low, high = wilson_interval(k, n, 0.999)
    ref = sstats.binomtest(k, n).proportion_ci(confidence_level=0.999, method="wilson")
    assert float(low) == pytest.approx(ref.low, abs=1e-12)
    assert float(high) == pytest.approx(ref.high, abs=1e-12)
    assert low <= k / n <= high


def test_wilson_empty_and_bad() -> None:
    low, high = wilson_interval(np.array([0, 3]), np.array([0, 3]))
    assert low.tolist()[0] == 0.0 and high.tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(4, 3)
    with pytest.raises(ValueError, match="level"):
        normal_quantile(1.0)


def test_normal_quantile_999() -> None:
    assert normal_quantile(0.999) == pytest.approx(3.2905267, abs=1e-6)


@settings(max_examples=15)
@given(st.integers(0, 2**32 - 1))
def test_ratio_estimate_delta_method_matches_batch_means(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.poisson(3.0, 40_000).astype(float) + 1
    y = 1.0 + 0.2 * x + rng.random(x.size)
    e = ratio_estimate(x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum(), x.size)
    b = batch_ratio_estimate(x.reshape(200, -1).sum(1), y.reshape(200, -1).sum(1))
    assert e.value == pytest.approx(x.sum() / y.sum(), rel=1e-12)
    assert b.value == pytest.approx(e.value, rel=1e-12)
    assert b.se == pytest.approx(e.se, rel=0.3)  # 200 batches: se of se ≈ 5 %


def test_mean_and_degenerate_intervals() -> None:
    e = mean_estimate(10.0, 20.0, 5)
    assert (e.value, e.se) == (2.0, 0.0) and e.contains(2.0) and e.z(2.0) == 0.0
    assert math.isinf(e.z(2.5))
    with pytest.raises(ValueError, match="sum_y"):
        ratio_estimate(1.0, 0.0, 1.0, 0.0, 0.0, 3)


def test_chi_square_pools_and_detects() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.04, 0.01])
    exact = chi_square_gof(p * 1000, p)
    assert exact.statistic == pytest.approx(0.0, abs=1e-9) and exact.p_value == pytest.approx(1.0)
    assert exact.cells == 5 and exact.dof == 4
    # 200 draws: the last cell expects 2 < 5 and is pooled with the one before (8 + 2).
    pooled = chi_square_gof([100, 60, 30, 0, 10], p)
    assert pooled.cells == 4 and pooled.statistic == pytest.approx(0.0, abs=1e-9)
    # Impossible outcome (probability 0) is an immediate rejection.
    bad = chi_square_gof([10, 0, 0, 0, 0, 0, 1], p)
    assert bad.statistic == math.inf and bad.p_value == 0.0 and bad.rejects(0.999)
    # A clearly wrong distribution is rejected, the right one is not (seeded draws).
    rng = np.random.default_rng(0)
    counts = np.bincount(rng.choice(5, 20_000, p=p), minlength=5)
    assert not chi_square_gof(counts, p).rejects(0.999)
    assert chi_square_gof(counts, [0.45, 0.35, 0.15, 0.04, 0.01]).rejects(0.999)
    with pytest.raises(ValueError, match="sum to 1"):
        chi_square_gof([1, 2], [0.5, 0.4])


def test_binomial_z_edges() -> None:
    z = binomial_z(np.array([50, 0, 10, 3]), np.array([100, 10, 10, 10]), np.array([0.5, 0, 1, 0]))
    assert z[0] == 0.0 and z[1] == 0.0 and z[2] == 0.0 and z[3] == math.inf
