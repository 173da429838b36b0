"""Decoding (greedy, temperature, top-p) and categorical sampling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import softmax

from simulate.decoder.lossless import chi_square
from simulate.decoder.sampling import Decoding, sample

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


# -- extreme temperatures and logits ---------------------------------------------------

EXTREME_LOGITS = [0.0, 1.0, -1.0, 1e30, -1e30, 1e308, -1e308, 5e-324, -np.inf]
extreme_rows = (
    st.lists(
        st.one_of(st.sampled_from(EXTREME_LOGITS), st.floats(-1e30, 1e30)), min_size=1, max_size=8
    )
    .filter(lambda r: any(np.isfinite(r)))
    .map(np.array)
)
extreme_temperatures = st.one_of(
    st.sampled_from([5e-324, 1e-308, 1e-300, 1e-30, 1.0, 1e30, 1e300, 1e308, np.finfo(float).max]),
    st.floats(-308.0, 308.0).map(lambda e: 10.0**e),
)


def _reference(z: np.ndarray, t: float) -> np.ndarray:
    """``softmax(z / t)`` in 60-digit arithmetic (mpmath: no overflow at any exponent)."""
    import mpmath

    with mpmath.workdps(60):
        zs = [mpmath.mpf(float(v)) for v in z]
        top = max(zs)
        w = [mpmath.mpf(0) if v == -mpmath.inf else mpmath.exp((v - top) / t) for v in zs]
        total = mpmath.fsum(w)
        return np.array([float(x / total) for x in w])


@given(extreme_rows, extreme_temperatures)
def test_probs_are_finite_and_exact_at_extreme_temperatures_and_logits(z, t) -> None:
    p = Decoding(t).probs(z)
    assert np.all(np.isfinite(p)) and np.all(p >= 0.0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(p[z == -np.inf] == 0.0)
    np.testing.assert_allclose(p, _reference(z, t), rtol=1e-9, atol=1e-290)
    order = np.argsort(z, kind="stable")  # softmax is monotone in the logits
    assert np.all(np.diff(p[order]) >= 0.0)


@given(extreme_rows, extreme_temperatures, st.floats(1e-300, 1.0))
def test_top_p_at_extreme_temperatures_renormalises_a_nucleus_holding_the_max(z, t, top_p):
    p = Decoding(t, top_p).probs(z)
    assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p[int(np.argmax(Decoding(t).probs(z)))] > 0.0  # top token, lowest id on ties
    kept = p > 0.0
    ref = _reference(z, t)
    np.testing.assert_allclose(p[kept], ref[kept] / ref[kept].sum(), rtol=1e-9, atol=1e-290)


@given(
    st.lists(st.integers(-3, 3), min_size=1, max_size=8).map(lambda r: np.array(r, float)),
    st.sampled_from([5e-324, 1e-308, 1e-100]),
)
def test_tiny_temperatures_tend_to_uniform_over_the_tied_maxima(z, t) -> None:
    """The T → 0 limit: mass 1/#ties on each maximal logit, 0 elsewhere (T = 0 exactly is
    greedy, which picks the lowest tied id)."""
    ties = z == z.max()
    expected = np.where(ties, 1.0 / ties.sum(), 0.0)
    np.testing.assert_array_equal(Decoding(t).probs(z), expected)
    assert Decoding(0.0).probs(z).argmax() == np.flatnonzero(ties)[0]


def test_all_masked_but_one_is_one_hot_at_any_temperature() -> None:
    z = np.array([-np.inf, -np.inf, -1e308, -np.inf])
    for t in (5e-324, 1.0, 1.7976931348623157e308):
        np.testing.assert_array_equal(Decoding(t, 0.3).probs(z), [0, 0, 1, 0])


@pytest.mark.parametrize(
    "row", [[np.nan, 0.0], [np.inf, 0.0], [-np.inf, -np.inf]], ids=["nan", "+inf", "all -inf"]
)
@pytest.mark.parametrize("t", [0.0, 1e-308, 1.0])
def test_logits_without_a_distribution_are_refused(row, t) -> None:
    with pytest.raises(ValueError, match="logits must be numbers < \\+inf"):
        Decoding(t).probs(np.array([[0.0, 1.0], row]))


@pytest.mark.parametrize("p", [[0.5, np.nan, 0.5], [np.nan] * 3, [0.0, 0.0], [np.inf, 1.0], []])
def test_sample_refuses_a_broken_distribution(p) -> None:
    with pytest.raises(ValueError, match="positive finite sum"):
        sample(np.array(p, dtype=float), np.random.default_rng(0))


def test_cascade_at_a_tiny_temperature_emits_the_target_argmax() -> None:
    """A nearly flat vocab-8 target at T = 1e-308 (max|logit|/T overflows float): the
    output is the T → 0 limit, the target's greedy decoding, not garbage token ids."""
    from simulate.decoder.cascade import CascadeDecoder
    from simulate.decoder.lossless import greedy_reference
    from simulate.decoder.synthetic import SyntheticLM

    target = SyntheticLM.random(8, 2, sharpness=0.01, seed=1, name="flat")
    drafter = target.drafter(0.9, seed=2, name="d")
    dec = CascadeDecoder([target, drafter], np.array([[3]]), decoding=Decoding(1e-308), seed=0)
    assert dec.generate([1], 12).tokens == greedy_reference(target, [1], 12)
