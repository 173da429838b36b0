"""The explicit-sequence witness (:mod:`simulate.fed_positions`) against the exact catch-up
law of :mod:`ewif.kernel.catch_up`: Monte Carlo agreement within 99.9 % intervals (fixed seeds), and
the witness rejects the law with the unfed-tail chain dropped."""

from __future__ import annotations

import zlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.kernel.cascade import Cascade
from ewif.kernel.catch_up import feed
from simulate.fed_positions import FedPositions
from tests.ewif.test_catch_up import _curves, cascades

Z999 = 3.29  # two-sided 99.9 % normal quantile


def _witness(c: Cascade, flags, streams: int, steps: int, seed: int):
    price = lambda i, m, rows: float(c.pass_cost.at_rows(i, m, rows))  # noqa: E731
    return FedPositions(c.alpha, c.K, c.fill, flags, price, seed=seed).run(streams, steps)


def _interval(run) -> tuple[float, float]:
    """Mean cost per counted step and its standard error (streams are independent)."""
    per_stream = run.cost / run.steps
    return float(per_stream.mean()), float(per_stream.std(ddof=1) / np.sqrt(per_stream.size))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(cascades(), st.sampled_from([0.0, 0.04]))
def test_cost_per_step_matches_witness(config, h: float) -> None:
    """Depth 1–3 cascades, random catch-up flags, logit rows free or at ``h`` per row:
    exact E[cost per step] lies inside the witness's 99.9 % interval (150 streams × 12
    steps, per-stream means)."""
    alpha, K, flags, fill = config
    n = K.shape[0]
    c = Cascade(
        alpha,
        None,
        K,
        cost_curve=_curves(n, slope=0.3),
        fill=fill,
        catch_up=flags,
        row_cost=[0.0] + [h] * n,
    )
    seed = zlib.crc32(repr((alpha.tolist(), K.tolist(), flags, fill)).encode())
    run = _witness(c, flags, 150, 12, seed)
    mean, se = _interval(run)
    # Rare outcomes (probability < 6.9/N) may be absent from N steps at 99.9 %: allow their
    # cost, bounded by a step's passes at the largest m of the exact law.
    rare = (
        6.9
        / (run.steps * run.tokens.size)
        * sum(s.passes * float(c.pass_cost.at(s.model, s.support.max())) for s in c.pass_sizes())
    )
    assert abs(mean - c.expected_cost()) <= Z999 * se + rare


def test_pass_sizes_match_witness() -> None:
    """Horizontal + vertical cascade (target, 1 reviewing 2, 2 also drafting for the target):
    every model's passes per step by m inside the witness's 99.9 % binomial-count bounds."""
    alpha = np.array([[0, 0.7, 0.5], [0, 0, 0.6], [0, 0, 0]])
    flags = [False, True, True]
    c = Cascade(alpha, None, [[2, 1], [0, 3]], cost_curve=_curves(2), catch_up=flags)
    run = _witness(c, flags, 400, 15, seed=7)
    total = run.tokens.size * run.steps
    for sizes in c.pass_sizes():
        seen = run.passes_per_step(sizes.model)
        for m, exact in enumerate(sizes.counts):
            if exact > 0 or m in seen:
                # passes with m per step are a count ≤ passes per step; Poisson-like bound
                se = np.sqrt(max(exact, 1e-3) / total) * np.sqrt(sizes.passes + 1)
                assert abs(seen.get(m, 0.0) - exact) <= Z999 * se, (sizes.model, m)


def test_unpriced_rows_are_rejected() -> None:
    """The witness tells the row-priced cost from the all-rows one (so the test above can
    fail): SD k = 1 at α = 0.9, a drafter row worth 0.1 of its 0.2 one-position pass."""
    alpha = np.array([[0, 0.9], [0, 0]])
    curves = [[1.0, 1.05, 1.1], [0.2, 0.4, 0.6]]
    c = Cascade(alpha, None, [[1]], cost_curve=curves, catch_up=[False, True], row_cost=[0, 0.1])
    mean, se = _interval(_witness(c, [False, True], 300, 12, seed=5))
    assert abs(mean - c.expected_cost()) <= Z999 * se
    assert abs(mean - c.with_row_cost(None).expected_cost()) > 10 * se


def test_dropped_chain_is_rejected() -> None:
    """The witness must tell the exact law from the one without the unfed-tail chain (every
    step starting with one unfed token, as the paper's accounting assumes): SD k = 2 at
    α = 0.9 with a drafter pass costing much more at m = 2."""
    alpha = np.array([[0, 0.9], [0, 0]])
    curves = [[1.0, 1.05, 1.1], [0.1, 0.5, 0.6]]
    c = Cascade(alpha, None, [[2]], cost_curve=curves, catch_up=[False, True])
    step = feed(1, 0, c._rows, c.alpha, c.fill, {}, {})
    no_chain = np.convolve([0.0, 1.0], step.first)  # U = 1 every step
    dropped = c.pass_sizes()[0].total_cost + c.pass_cost.expected(1, no_chain) + 0.1
    mean, se = _interval(_witness(c, [False, True], 300, 12, seed=3))
    assert abs(mean - c.expected_cost()) <= Z999 * se
    assert abs(mean - dropped) > 10 * se
    plain = Cascade(alpha, None, [[2]], cost_curve=curves)
    assert abs(mean - plain.expected_cost()) > 10 * se
