"""The token-level cascade decoder: greedy output identical to the target's greedy
decoding, stop conditions inside accepted chunks, statistics, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from simulate.decoder.cascade import CascadeDecoder, CascadeStats
from simulate.decoder.lossless import chi_square, greedy_reference
from simulate.decoder.sampling import Decoding
from simulate.decoder.synthetic import SyntheticLM, SyntheticProposer

TARGET = SyntheticLM.random(8, 2, seed=1, name="t")
D1 = TARGET.drafter(0.8, seed=2, name="d1")
D2 = TARGET.drafter(0.6, seed=3, name="d2")
D3 = D1.drafter(0.7, seed=4, name="d3")
PROP = SyntheticProposer.distilled(D2)
COPY = TARGET.drafter(1.0, name="copy")  # identical to the target: everything is accepted
SAMPLING = Decoding(1.0)


@st.composite
def greedy_cascades(draw):
    """Random depth 1-3, upper-triangular K with entries 0-3, Proposer or model leaf,
    lenience 1-6 below the target, random prompt."""
    n = draw(st.integers(1, 3))
    pool = [D1, D2, D3, COPY]
    drafters = [pool[i] for i in draw(st.permutations(range(4)))[:n]]
    if draw(st.booleans()):
        drafters[-1] = PROP
    K = np.zeros((n, n), dtype=int)
    for r in range(n):
        for j in range(r, n):
            K[r, j] = draw(st.integers(0, 3))
    if not K[0].any():
        K[0, draw(st.integers(0, n - 1))] = draw(st.integers(1, 3))
    lenience = draw(st.sampled_from([1.0, 1.5, 3.0, 6.0]))
    prompt = draw(st.lists(st.integers(0, 7), min_size=1, max_size=4))
    return [TARGET, *drafters], K, lenience, prompt


@settings(max_examples=60)
@given(greedy_cascades())
def test_greedy_output_is_token_identical_to_target_greedy(case) -> None:
    models, K, lenience, prompt = case
    dec = CascadeDecoder(models, K, lenience=lenience, decoding=Decoding(0.0))
    res = dec.generate(prompt, 16)
    assert res.tokens == greedy_reference(TARGET, prompt, 16)
    assert res.stop_reason == "max_new_tokens"
    assert res.stats.passes[0] == res.stats.target_steps == len(res.stats.accepted_lengths)


def test_autoregressive_decoding_and_its_pass_counts() -> None:
    dec = CascadeDecoder([TARGET], np.zeros((0, 0)), decoding=Decoding(0.0))
    res = dec.generate([3, 1], 7)
    assert res.tokens == greedy_reference(TARGET, [3, 1], 7)
    assert res.stats.accepted_lengths == [1] * 7
    assert res.stats.passes.tolist() == [7]
    # the cache contract: the prompt once, then one new position per pass
    assert res.stats.tokens_fed.tolist() == [2 + 6]


def _first_new_token(ref: list[int]) -> int:
    return next(i for i in range(1, len(ref)) if ref[i] not in ref[:i])


def test_eos_inside_an_accepted_chunk_ends_the_output() -> None:
    dec = CascadeDecoder([TARGET, COPY], [[5]], decoding=Decoding(0.0))
    ref = greedy_reference(TARGET, [1, 2], 6)
    i = _first_new_token(ref)
    res = dec.generate([1, 2], 50, eos_token_id=ref[i])
    assert res.tokens == ref[: i + 1]
    assert res.stop_reason == "eos"
    assert res.stats.accepted_lengths == [6]  # the chunk the target accepted, bonus included


def test_max_new_tokens_inside_an_accepted_chunk() -> None:
    dec = CascadeDecoder([TARGET, COPY], [[5]], decoding=SAMPLING, seed=3)
    res = dec.generate([1, 2], 4)
    assert len(res.tokens) == 4 and res.stop_reason == "max_new_tokens"
    assert res.stats.accepted_lengths == [6]
    assert dec.generate([1, 2], 0).tokens == []


def test_plain_sd_statistics_match_the_bernoulli_model() -> None:
    """With a drafter accepted with probability exactly alpha per context (temperature 1),
    tokens per target step follow the truncated geometric law of Leviathan et al.:
    P(i) = (1 − α) α^(i−1) for i ≤ k, P(k + 1) = α^k. Chi-square at level 1e-3 (seed 5),
    and the per-position acceptance lies in its 99.9% binomial interval."""
    alpha, k = 0.8, 3
    dec = CascadeDecoder([TARGET, D1], [[k]], decoding=SAMPLING, seed=5)
    st_ = sum(dec.generate([1, 2], 100).stats for _ in range(120))
    law = {(i,): (1 - alpha) * alpha ** (i - 1) for i in range(1, k + 1)}
    law[(k + 1,)] = alpha**k
    counts = {(i,): st_.accepted_lengths.count(i) for i in range(1, k + 2)}
    assert chi_square(counts, law).p_value >= 1e-3
    reached, accepted = st_.target_position_counts
    z = stats.norm.ppf(1 - 0.0005)
    for n, a in zip(reached, accepted, strict=True):
        assert abs(a / n - alpha) <= z * np.sqrt(alpha * (1 - alpha) / n)
    assert st_.passes.tolist() == [st_.target_steps, k * st_.target_steps]
    reviewed, ok = st_.reviews[(0, 1)]
    assert ok == sum(st_.accepted_lengths) - st_.target_steps
    assert reviewed == sum(min(n, k) for n in st_.accepted_lengths)
    assert st_.acceptance(0, 1) == ok / reviewed
    assert st_.mean_accepted_length == pytest.approx((1 - alpha ** (k + 1)) / (1 - alpha), rel=0.02)


def test_three_level_statistics_and_sources() -> None:
    dec = CascadeDecoder(
        [TARGET, D1, D2, PROP],
        [[1, 0, 2], [0, 2, 1], [0, 0, 2]],
        lenience=3.0,
        decoding=SAMPLING,
        seed=6,
    )
    res = dec.generate([1, 2, 1, 2], 300)
    s = res.stats
    assert len(res.tokens) == 300
    assert set(s.reviews) <= {(0, 1), (0, 3), (1, 2), (1, 3), (2, 3)}
    assert all(0 <= a <= n for n, a in s.reviews.values())
    assert s.reviews[(0, 1)][1] + s.reviews[(0, 3)][1] == s.target_position_counts[1].sum()
    assert set(s.sources) <= {"prompt", "generated", "bigram"}
    assert sum(s.sources.values()) <= s.target_position_counts[1].sum()
    assert sum(s.accepted_lengths) >= 300
    assert (s.tokens_fed >= s.passes).all()
    other = dec.generate([5], 10).stats
    total = s + other
    assert isinstance(total, CascadeStats)
    assert total.target_steps == s.target_steps + other.target_steps
    assert total.accepted_lengths == s.accepted_lengths + other.accepted_lengths
    assert (total.passes == s.passes + other.passes).all()
    assert total.reviews[(1, 2)][0] == s.reviews[(1, 2)][0] + other.reviews.get((1, 2), (0, 0))[0]
    assert total.sources == s.sources + other.sources
    assert sum([s, other]).accepted_lengths == total.accepted_lengths


def test_proposer_without_source_labels_is_counted_by_name() -> None:
    class Repeat:
        name, vocab_size = "repeat", 8

        def propose(self, tokens, prompt_length, k):
            return [tokens[-1]] * k

    res = CascadeDecoder([TARGET, Repeat()], [[2]], decoding=Decoding(0.0)).generate([4], 40)
    assert res.tokens == greedy_reference(TARGET, [4], 40)
    assert set(res.stats.sources) <= {"repeat"}


def test_progress_and_interrupt() -> None:
    seen: list[int] = []
    dec = CascadeDecoder([TARGET, D1], [[2]], decoding=SAMPLING, seed=7)
    res = dec.generate([1], 25, progress=seen.append)
    assert sum(seen) == 25 == len(res.tokens)

    class Stop:
        name, vocab_size = "stop", 8

        def __init__(self):
            self.calls = 0

        def logits(self, tokens, n):
            self.calls += 1
            if self.calls == 4:
                raise KeyboardInterrupt
            return TARGET.logits(tokens, n)

    res = CascadeDecoder([Stop()], [], decoding=Decoding(0.0)).generate([1], 10)
    assert res.stop_reason == "interrupted"
    assert res.tokens == greedy_reference(TARGET, [1], 3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"K": [[1, 1], [1, 1]]}, "upper-triangular"),
        ({"K": [[1, 1]]}, r"shape \(2, 2\)"),
        ({"K": [[1, 2, 3]]}, r"shape \(2, 2\)"),
        ({"K": [[1, -1], [0, 1]]}, "K must hold integers >= 0"),
        ({"K": [[1.5, 1], [0, 1]]}, "K must hold integers"),
        ({"K": [[0, 0], [0, 1]]}, "row 1"),
        ({"K": [[1], [0, 1]]}, "rectangular array of integers"),
        ({"models": [TARGET, PROP, D2]}, "Proposer"),
        ({"models": [PROP, D1, D2]}, "cannot review"),
        ({"models": [TARGET, D1, SyntheticLM.random(9, 2)]}, "vocabulary"),
        ({"models": []}, "non-empty"),
        ({"lenience": 0.5}, "lenience must be a finite number >= 1"),
        ({"lenience": float("nan")}, "lenience"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_construction_raises_value_error(kwargs, match) -> None:
    args = {"models": [TARGET, D1, D2], "K": [[1, 1], [0, 1]], **kwargs}
    with pytest.raises(ValueError, match=match):
        CascadeDecoder(**args)


def test_bad_types_raise_type_error() -> None:
    with pytest.raises(TypeError, match="models\\[1\\]"):
        CascadeDecoder([TARGET, object()], [[1]])
    with pytest.raises(TypeError, match="decoding"):
        CascadeDecoder([TARGET, D1], [[1]], decoding="greedy")
    with pytest.raises(TypeError, match="lenient_target"):
        CascadeDecoder([TARGET, D1], [[1]], lenient_target=1)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([], 5), "empty prompt"),
        (([1, 8], 5), r"token ids in \[0, 8\)"),
        (([1, 2.0], 5), "integer token ids"),
        (([1], -1), "max_new_tokens"),
        (([1], 5, 8), "eos_token_id"),
    ],
)
def test_bad_generate_arguments(args, match) -> None:
    dec = CascadeDecoder([TARGET, D1], [[2]])
    with pytest.raises(ValueError, match=match):
        dec.generate(*args)


def test_misbehaving_models_are_reported() -> None:
    class Short:
        name, vocab_size = "short", 8

        def propose(self, tokens, prompt_length, k):
            return [0] * (k - 1)

    with pytest.raises(ValueError, match="proposer 'short' must return 2 token ids"):
        CascadeDecoder([TARGET, Short()], [[2]]).generate([1], 3)

    class Wide:
        name, vocab_size = "wide", 8

        def logits(self, tokens, n):
            return np.zeros((n, 9))

    with pytest.raises(ValueError, match=r"shape \(1, 9\)"):
        CascadeDecoder([Wide()], []).generate([1], 3)


@given(
    st.lists(st.integers(0, 3), max_size=12),
    st.lists(st.integers(0, 3), max_size=12),
    st.one_of(st.none(), st.integers(-2, 14)),
)
def test_common_prefix_is_the_longest_shared_prefix_within_the_limit(a, b, limit):
    from simulate.decoder.interface import common_prefix

    brute = 0
    while brute < min(len(a), len(b)) and a[brute] == b[brute]:
        brute += 1
    if limit is not None:
        brute = min(brute, max(limit, 0))
    assert common_prefix(a, b, limit) == brute
    assert common_prefix(tuple(a), b, limit) == brute  # any sequences of ids
