"""Decoding (greedy, temperature, top-p) and categorical sampling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import softmax

from simulate.tokens.lossless import chi_square
from simulate.tokens.sampling import Decoding, sample

logit_rows = st.lists(st.floats(-20, 20), min_size=2, max_size=12).map(np.array)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("inf")}, "temperature"),
        ({"temperature": 1.0, "top_p": 0.0}, r"top_p must be a finite number in \(0, 1\]"),
        ({"temperature": 1.0, "top_p": 1.5}, "top_p"),
    ],
)
def test_bad_decoding_raises(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        Decoding(**kwargs)


def test_greedy_is_the_one_hot_argmax_with_lowest_id_on_ties() -> None:
    d = Decoding()
    assert d.greedy
    np.testing.assert_array_equal(
        d.probs(np.array([[1.0, 3.0, 3.0], [0.0, -1.0, -2.0]])), [[0, 1, 0], [1, 0, 0]]
    )


@given(logit_rows, st.floats(0.05, 5.0))
def test_temperature_is_a_scaled_softmax(z, t) -> None:
    np.testing.assert_allclose(Decoding(t).probs(z), softmax(z / t), rtol=1e-10, atol=1e-300)
    np.testing.assert_allclose(Decoding(t).probs(np.vstack([z, -z]))[1], softmax(-z / t))


@given(logit_rows, st.floats(0.01, 1.0))
def test_top_p_keeps_the_smallest_nucleus_reaching_top_p(z, top_p) -> None:
    full = softmax(z)
    p = Decoding(1.0, top_p).probs(z)
    kept = p > 0
    assert p.sum() == pytest.approx(1.0)
    order = sorted(range(len(z)), key=lambda i: (-full[i], i))
    mass_before = 0.0
    for i in order:  # kept iff the mass ranked strictly before it is < top_p
        assert (
            kept[i] == (mass_before < top_p * full.sum() - 1e-12) or abs(mass_before - top_p) < 1e-9
        )
        mass_before += full[i]
    np.testing.assert_allclose(p[kept], full[kept] / full[kept].sum(), rtol=1e-9)


def test_sample_follows_the_distribution_and_never_draws_zeros() -> None:
    """Chi-square at level 1e-3 over 40 000 draws, seed 3."""
    rng = np.random.default_rng(3)
    p = np.array([0.5, 0.0, 0.25, 0.125, 0.125, 0.0])
    draws = [sample(p, rng) for _ in range(40_000)]
    counts = {(i,): draws.count(i) for i in set(draws)}
    assert 1 not in draws and 5 not in draws
    assert chi_square(counts, {(i,): float(p[i]) for i in np.flatnonzero(p)}).p_value >= 1e-3
