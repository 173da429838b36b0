"""``simulate.compare``: z-scores against the exact theory, and that they can fail.

Levels: family-wise 99.9 % (Bonferroni); fixed seeds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ewif.kernel.cascade import Cascade
from simulate.bernoulli import simulate
from simulate.compare import compare_with_exact, default_max_position


def _cascade(alpha01: float = 0.8) -> Cascade:
    a = np.full((3, 3), np.nan)
    a[0, 1], a[0, 2], a[1, 2] = alpha01, 0.5, 0.7
    return Cascade(a, [1.0, 0.1, 0.0], [[2, 4], [0, 3]], cost_per_token=[0.01, 0.0, 0.0])


def test_every_quantity_is_compared_and_agrees() -> None:
    cascade = _cascade()
    c = compare_with_exact(cascade, trials=50_000, seed=8)
    names = [r.quantity for r in c.rows]
    m = default_max_position(cascade)
    assert names[:3] == ["ewif", "expected_tokens", "expected_cost"]
    assert names[3:6] == ["calls[0]", "calls[1]", "calls[2]"]
    assert names[6:] == [f"accept@{i}" for i in range(1, m + 1)]
    assert c.row("calls[0]").z == 0.0 and c.row("calls[0]").se == 0.0
    assert c.agrees(0.999) and c.max_abs_z < 4.0
    assert c.row("ewif").exact == cascade.ewif()
    json.dumps(c.to_dict())
    with pytest.raises(KeyError, match="no quantity"):
        c.row("nope")


def test_a_slightly_wrong_theory_is_detected() -> None:
    """Simulate α01 = 0.8 but compare with the exact values of α01 = 0.78."""
    truth, wrong = _cascade(0.8), _cascade(0.78)
    result = simulate(truth, 100_000, seed=1)
    assert compare_with_exact(truth, result=result).agrees()
    off = compare_with_exact(wrong, result=result)
    assert not off.agrees()
    assert off.row("accept@1").z > 5 and off.chi_square.p_value < 1e-6


def test_default_max_position_follows_the_curve() -> None:
    cascade = _cascade()
    curve = cascade.acceptance_by_position(64)
    m = default_max_position(cascade)
    assert curve[m - 1] >= 1e-3 > curve[m]
    assert len(compare_with_exact(cascade, trials=2_000, max_position=2).rows) == 6 + 2
