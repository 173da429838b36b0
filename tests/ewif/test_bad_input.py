"""Bad input raises ValueError/TypeError naming the argument and what is allowed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ewif import (
    Pgf,
    T,
    best_k,
    horizontal_ewif,
    horizontal_gradient,
    phi,
    review,
    sd_ewif,
    vertical_c2_threshold,
    vertical_ewif,
)

BAD_PROBABILITIES = [-0.1, 1.5, math.nan, math.inf, "0.5", True]
BAD_COSTS = [-1e-9, -1.0, math.nan, math.inf]
BAD_COUNTS = [-1, 2.5, math.nan, "3", True]


@pytest.mark.parametrize("value", BAD_PROBABILITIES)
def test_bad_alpha(value) -> None:
    calls = [
        lambda: phi(value, 2),
        lambda: T(value, Pgf.point(2)),
        lambda: review(value, Pgf.point(2)),
        lambda: sd_ewif(value, 2, 0.1),
        lambda: best_k(value, 0.1),
        lambda: vertical_ewif(value, 0.5, 2, 2, 0.1, 0.01),
        lambda: vertical_c2_threshold(value, 0.5, 2, 2, 0.1),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="alpha"):
            call()
    with pytest.raises(ValueError, match="alpha2"):
        vertical_ewif(0.5, value, 2, 2, 0.1, 0.01)
    with pytest.raises(ValueError, match="alphas"):
        horizontal_ewif([value], [0.1])


def test_alpha_message_states_the_range() -> None:
    with pytest.raises(ValueError, match=r"alpha must be a finite number in \[0, 1\], got 1.5"):
        sd_ewif(1.5, 2, 0.1)
    with pytest.raises(ValueError, match=r"alpha must hold finite numbers in \[0, 1\]"):
        sd_ewif(np.array([0.5, 1.5]), 2, 0.1)


@pytest.mark.parametrize("value", BAD_COSTS)
def test_bad_costs(value) -> None:
    with pytest.raises(ValueError, match="c "):
        sd_ewif(0.5, 2, value)
    with pytest.raises(ValueError, match="c "):
        best_k(0.5, value)
    with pytest.raises(ValueError, match="c1"):
        vertical_ewif(0.5, 0.5, 2, 2, value, 0.01)
    with pytest.raises(ValueError, match="c2"):
        vertical_ewif(0.5, 0.5, 2, 2, 0.1, value)
    with pytest.raises(ValueError, match="c1"):
        vertical_c2_threshold(0.5, 0.5, 2, 2, value)
    with pytest.raises(ValueError, match="costs"):
        horizontal_ewif([0.5, 0.5], [0.1, value])
    with pytest.raises(ValueError, match="costs"):
        horizontal_gradient([0.5], [value])


def test_cost_message_states_the_range() -> None:
    with pytest.raises(ValueError, match=r"c must be a finite number >= 0, got -1.0"):
        sd_ewif(0.5, 2, -1.0)
    with pytest.raises(ValueError, match=r"c must hold finite numbers >= 0"):
        sd_ewif(0.5, 2, [0.1, -1.0])


@pytest.mark.parametrize("value", BAD_COUNTS)
def test_bad_counts(value) -> None:
    with pytest.raises(ValueError, match="k must"):
        phi(0.5, value)
    with pytest.raises(ValueError, match="k must"):
        sd_ewif(0.5, value, 0.1)
    with pytest.raises(ValueError, match="k must"):
        vertical_ewif(0.5, 0.5, value, 2, 0.1, 0.01)
    with pytest.raises(ValueError, match="n must"):
        vertical_ewif(0.5, 0.5, 2, value, 0.1, 0.01)


def test_count_message_states_the_range() -> None:
    with pytest.raises(ValueError, match="k must be an integer >= 0, got -1"):
        phi(0.5, -1)
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        vertical_c2_threshold(0.5, 0.5, 0, 2, 0.1)
    with pytest.raises(ValueError, match="n must be an integer >= 1, got 0"):
        vertical_c2_threshold(0.5, 0.5, 2, 0, 0.1)


def test_non_numeric_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="alpha must hold real numbers"):
        sd_ewif(["0.5", "0.6"], 2, 0.1)
    with pytest.raises(ValueError, match="k must hold integers >= 0"):
        sd_ewif(0.5, np.array([True, False]), 0.1)


def test_integral_floats_are_accepted_as_counts() -> None:
    assert phi(0.5, 3.0) == phi(0.5, 3)
    assert sd_ewif(0.5, np.array([2.0]), 0.1)[0] == sd_ewif(0.5, 2, 0.1)


def test_mismatched_lengths_and_shapes() -> None:
    with pytest.raises(ValueError, match=r"same length.*len\(alphas\)=2, len\(costs\)=3"):
        horizontal_ewif([0.5, 0.5], [0.1, 0.1, 0.1])
    with pytest.raises(ValueError, match="same length"):
        horizontal_gradient([0.5], [0.1, 0.1])
    with pytest.raises(ValueError, match="leading axes must broadcast"):
        horizontal_ewif(np.full((2, 3), 0.5), np.full((4, 3), 0.1))
    with pytest.raises(ValueError, match="positions on the last axis"):
        horizontal_ewif(0.5, 0.1)
    with pytest.raises(ValueError, match="alpha, k, c must broadcast"):
        sd_ewif(np.full(3, 0.5), np.arange(4), 0.1)
    with pytest.raises(ValueError, match="must broadcast"):
        vertical_ewif(np.full(3, 0.5), 0.5, np.arange(2) + 1, 2, 0.1, 0.01)


def test_pgf_argument_must_be_a_pgf() -> None:
    with pytest.raises(TypeError, match=r"pgf must be an ewif.Pgf, got list"):
        T(0.5, [0.0, 1.0])
    with pytest.raises(TypeError, match=r"pgf must be an ewif\.Pgf"):
        review(0.5, np.array([0.0, 1.0]))
