"""The Monte Carlo witness with measured pass-cost curves against the exact ``ewif.Cascade``.

Confidence levels as in ``test_bernoulli``: two-sided 99.9 % intervals (z = 3.29),
Bonferroni across the compared quantities; seeds fixed (hypothesis derandomized, ``seed=``
drawn from it), so every outcome is reproducible.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from simulate.bernoulli import CascadeSpec, simulate
from simulate.compare import compare_with_exact
from simulate.loop_reference import simulate_loop
from tests.simulate.test_bernoulli import cascades

LEVEL = 0.999


@st.composite
def curved(draw: st.DrawFn, n: int) -> Cascade:
    """A random configuration of ``n`` drafters priced by random (often non-monotone) curves."""
    base = draw(cascades(n))
    target = [1.0, *draw(st.lists(st.floats(0.5, 3.0), max_size=4))]
    drafters = [draw(st.lists(st.floats(0.0, 0.3), min_size=1, max_size=4)) for _ in range(n)]
    return Cascade(base.alpha, None, base.K, fill=base.fill, cost_curve=[target, *drafters])


@pytest.mark.parametrize("depth", [1, 2, 3])
@settings(max_examples=12)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_random_curve_cascades_agree_with_exact_theory(depth, data, seed):
    cascade = data.draw(curved(depth), label="cascade")
    comparison = compare_with_exact(cascade, trials=20_000, seed=seed, level=LEVEL)
    assert comparison.result.ewif(LEVEL).contains(cascade.ewif()), comparison.row("ewif")
    assert comparison.agrees(LEVEL), [r for r in comparison.rows if abs(r.z) > 3.29]


def test_spec_reads_curves_and_prices_passes_itself():
    a = np.full((2, 2), np.nan)
    a[0, 1] = 0.6
    casc = Cascade(a, None, [[4]], cost_curve=[[1, 1.97, 1.79, 2.07], [0.2, 0.4, 0.3]])
    spec = CascadeSpec.of(casc)
    m = np.arange(1, 8)
    np.testing.assert_allclose(spec.pass_cost(0, m), [1, 1.97, 1.79, 2.07, 2.35, 2.63, 2.91])
    np.testing.assert_array_equal(spec.pass_cost(1, m), [0.2, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3])
    # every step: one target review of m = 5 and four leaf passes of m = 1
    r = simulate(casc, 2_000, seed=1)
    assert r.expected_cost().value == pytest.approx(2.35 + 4 * 0.2, rel=1e-12)
    assert r.expected_cost().se < 1e-8  # every step costs the same (rounding only)


def test_plain_loop_reference_prices_curves_too():
    a = np.full((4, 4), np.nan)
    a[0, 1:] = [0.8, 0.7, 0.5]
    a[1, 2:] = [0.85, 0.6]
    a[2, 3] = 0.65
    casc = Cascade(
        a,
        None,
        [[2, 2, 5], [0, 3, 5], [0, 0, 5]],
        cost_curve=[[1, 1.4, 1.2, 1.5], [0.1, 0.12], [0.03, 0.02], [0.0, 0.001]],
    )
    loop = simulate_loop(casc, 6_000, seed=5)
    assert loop.ewif(LEVEL).contains(casc.ewif())
    assert compare_with_exact(casc, result=loop).agrees(LEVEL)
