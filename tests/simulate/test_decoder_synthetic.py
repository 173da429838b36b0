"""Synthetic language models with exactly settable acceptance, and the synthetic proposer."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulate.decoder.interface import Proposer, TokenModel
from simulate.decoder.synthetic import SyntheticLM, SyntheticProposer, acceptance_rates

TARGET = SyntheticLM.random(8, 2, seed=1)


@given(st.floats(0.5, 1.0), st.integers(0, 1000), st.integers(2, 16), st.integers(1, 2))
def test_drafter_acceptance_is_exactly_alpha_in_every_context(alpha, seed, vocab, context):
    """Every alpha in [0.5, 1] is reachable, for any table."""
    target = SyntheticLM.random(vocab, context, seed=seed)
    d = target.drafter(alpha, seed=seed + 1)
    np.testing.assert_allclose(acceptance_rates(target, d), alpha, atol=1e-12)
    np.testing.assert_allclose(d.table.sum(axis=1), 1.0, atol=1e-12)


def test_drafter_range_and_copy() -> None:
    with pytest.raises(ValueError, match=r"alpha must be in \[0\.\d+, 1\]"):
        TARGET.drafter(0.01)
    np.testing.assert_array_equal(TARGET.drafter(1.0).table, TARGET.table)


def test_logits_are_log_probabilities_of_the_last_n_prefixes() -> None:
    seq = [3, 1, 4, 1, 5]
    out = TARGET.logits(seq, 3)
    assert out.shape == (3, 8)
    for row, end in zip(out, (3, 4, 5), strict=True):
        np.testing.assert_allclose(np.exp(row), TARGET.distribution(seq[:end]))
    # the context is the last two tokens, padded before the start
    np.testing.assert_array_equal(TARGET.distribution([9 % 8, 3, 1]), TARGET.distribution([3, 1]))
    assert not np.array_equal(TARGET.distribution([1]), TARGET.distribution([3, 1]))
    with pytest.raises(ValueError, match="n must be in"):
        TARGET.logits(seq, 6)
    assert isinstance(TARGET, TokenModel)


@pytest.mark.parametrize(
    ("table", "context", "match"),
    [
        (np.full((9, 8), 1 / 8), 2, "rows"),
        (np.full((9, 8), 0.2), 1, "sum to 1"),
        (np.full((9,), 1.0), 1, "2-D"),
        (np.full((9, 8), -1.0), 1, "table must hold"),
    ],
)
def test_bad_tables(table, context, match) -> None:
    with pytest.raises(ValueError, match=match):
        SyntheticLM(table, context)


def test_proposer_copies_earlier_continuations_then_falls_back_to_bigram() -> None:
    prop = SyntheticProposer([1, 2, 3, 0], name="p")
    assert isinstance(prop, Proposer)
    # last token 2 occurred at index 1 (inside the prompt of length 3) followed by 0
    assert prop.propose([5 % 4, 2, 0, 2], 3, 3) == [0, 2, 0]
    assert prop.last_sources == ["prompt", "generated", "generated"]
    assert prop.propose([3], 1, 2) == [0, 1]
    assert prop.last_sources == ["bigram", "bigram"]
    assert prop.propose([3], 1, 2) == [0, 1]  # deterministic
    distilled = SyntheticProposer.distilled(TARGET)
    assert distilled.propose([6], 1, 1) == [int(np.argmax(TARGET.distribution([6])))]
    with pytest.raises(ValueError, match="bigram"):
        SyntheticProposer([1, 4, 0, 0])
