"""One speculative review: the law (★) of an output token, the sampling review against
it, point masses, and the greedy review."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulate.decoder.lossless import chi_square
from simulate.decoder.sampling import sample
from simulate.decoder.verify import greedy_verify, output_law, speculative_verify

V = 6


@st.composite
def laws(draw, positive: bool = False):
    """A random distribution over V tokens (optionally with zeros)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(V, draw(st.sampled_from([0.3, 1.0, 5.0]))))
    if positive:
        return 0.9 * p + 0.1 / V
    if draw(st.booleans()):
        p[rng.integers(V)] = 0.0
        p = p / p.sum() if p.sum() > 0 else np.full(V, 1 / V)
    return p


lenience = st.one_of(st.just(1.0), st.floats(1.0, 10.0), st.just(1e9))


@given(laws(), laws(), lenience, st.integers(0, V - 1))
def test_output_law_is_a_distribution_with_at_least_the_accepted_mass(q, p, lam, x) -> None:
    r = output_law(q, x, p, lam)
    assert r.min() >= 0.0 and r.sum() == pytest.approx(1.0, abs=1e-12)
    assert (r >= np.minimum(q, lam * p) - 1e-12).all()


@given(laws(), laws(), st.integers(0, V - 1))
def test_lenience_one_gives_the_reviewer_law_exactly(q, p, x) -> None:
    """Leviathan et al.'s theorem: min(q, p) + max(0, p − q) = p."""
    r = output_law(q, x, p, 1.0)
    np.testing.assert_allclose(r, p, atol=1e-15)
    # and the general formula (★) agrees with it at l = 1
    m = np.minimum(q, p)
    res = np.maximum(p - q, 0)
    if res.sum() > 0:
        np.testing.assert_allclose(m + (1 - m.sum()) * res / res.sum(), p, atol=1e-12)


@given(laws(positive=True), laws(positive=True), st.integers(0, V - 1))
def test_infinite_lenience_accepts_the_draft_law(q, p, x) -> None:
    np.testing.assert_allclose(output_law(q, x, p, 1e12), q, atol=1e-12)


@given(laws(), lenience, st.integers(0, V - 1))
def test_point_mass_matches_the_dense_one_hot_law(p, lam, x) -> None:
    one_hot = np.eye(V)[x]
    sparse = output_law(None, x, p, lam)
    dense = output_law(one_hot, x, p, lam)
    np.testing.assert_allclose(one_hot if sparse is None else sparse, dense, atol=1e-12)
    assert (sparse is None) == (lam != 1.0 and lam * p[x] >= 1.0)


@pytest.mark.parametrize(("lenience", "point_mass"), [(1.0, False), (3.0, False), (3.0, True)])
def test_sampling_review_realises_the_output_law(lenience: float, point_mass: bool) -> None:
    """Monte Carlo: draft x ~ q (or a fixed token), one review; the output token's law is
    (★). Chi-square at level 1e-3, 30 000 reviews, seed 21."""
    rng = np.random.default_rng(21)
    q = np.array([0.4, 0.05, 0.2, 0.05, 0.3, 0.0])
    p = np.array([0.1, 0.3, 0.1, 0.2, 0.1, 0.2])
    probs = np.vstack([p, np.full(V, 1 / V)])
    counts: dict[tuple[int], int] = {}
    for _ in range(30_000):
        x = 0 if point_mass else sample(q, rng)
        out = speculative_verify([x], [None if point_mass else q], probs, lenience, rng, False)
        counts[(out.tokens[0],)] = counts.get((out.tokens[0],), 0) + 1
    law = output_law(None, 0, p, lenience) if point_mass else output_law(q, 0, p, lenience)
    assert chi_square(counts, {(i,): law[i] for i in range(V) if law[i] > 0}).p_value >= 1e-3


def test_review_structure_and_laws() -> None:
    rng = np.random.default_rng(0)
    p = np.full((3, V), 1 / V)
    # the draft's own law: always accepted (u·q < p for u < 1), bonus from the last row
    out = speculative_verify([2, 5], [p[0], p[1]], p, 1.0, rng, True)
    assert out.accepted == 2 and out.tokens[:2] == [2, 5] and len(out.tokens) == 3
    assert len(out.laws) == 3 and all(np.array_equal(law, p[0]) for law in out.laws)
    # a token the reviewer gives probability 0 is never accepted, whatever the lenience
    zero = p.copy()
    zero[0, 2] = 0.0
    zero[0] /= zero[0].sum()
    for _ in range(50):
        out = speculative_verify([2, 5], [None, p[1]], zero, 1e6, rng, True)
        assert out.accepted == 0 and out.tokens[0] != 2 and len(out.laws) == 1
    # an empty draft yields the bonus token only
    out = speculative_verify([], [], p[:1], 3.0, rng, True)
    assert out.accepted == 0 and len(out.tokens) == 1 and len(out.laws) == 1


def test_greedy_review_rules() -> None:
    logits = np.log(np.array([[0.4, 0.4, 0.2], [0.5, 0.3, 0.2], [0.1, 0.2, 0.7]]))
    # l = 1: only the argmax, lowest id on ties
    assert greedy_verify([1, 0], logits, 1.0).tokens == [0]
    assert greedy_verify([0, 0], logits, 1.0).tokens == [0, 0, 2]
    # l = 2: accept x iff 2·p(x) >= max p
    assert greedy_verify([1, 2], logits, 2.0).tokens == [1, 0]
    assert greedy_verify([1, 1], logits, 2.0).tokens == [1, 1, 2]
    assert greedy_verify([], logits[:1], 5.0).tokens == [0]
