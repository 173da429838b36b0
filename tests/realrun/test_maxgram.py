"""Max-Gram equals a brute-force reference of its definition; rollback; torch path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.bigram import BigramTable
from realrun.maxgram import MaxGram, SuffixAutomaton
from simulate.decoder.interface import Proposer

V = 6
BIGRAM = BigramTable(np.array([3, 0, 5, 1, 1, 2]), "test", "test")


def _lcs(s: list[int], e: int, cap: int) -> int:
    """Common suffix length of s and s[:e+1], at most cap (direct loop)."""
    m = 0
    while m < cap and e - m >= 0 and s[e - m] == s[len(s) - 1 - m]:
        m += 1
    return m


def reference_step(s, p, occurrence, priority, min_match):
    """One step of the module docstring's definition, by brute force."""
    prompt = [(_lcs(s, e, e + 1), e) for e in range(p - 1)]
    generated = [(_lcs(s, e, e - p + 1), e) for e in range(p, len(s) - 1)]

    def best(cands):
        m = max((c[0] for c in cands), default=0)
        ends = [e for length, e in cands if length == m]
        return m, (ends[0] if occurrence == "earliest" else ends[-1]) if ends else -1

    mp, ep = best(prompt)
    mg, eg = best(generated)
    if mp >= min_match and (priority == "prompt" or mp >= mg):
        return s[ep + 1], "prompt"
    if mg >= min_match:
        return s[eg + 1], "generated"
    return int(BIGRAM.next_token[s[-1]]), "bigram"


def reference(tokens, p, k, **kw):
    s, out, src = list(tokens), [], []
    for _ in range(k):
        t, label = reference_step(s, p, **kw)
        out.append(t)
        src.append(label)
        s.append(t)
    return out, src


options = st.fixed_dictionaries(
    {
        "occurrence": st.sampled_from(["earliest", "latest"]),
        "priority": st.sampled_from(["prompt", "longest"]),
        "min_match": st.integers(1, 3),
    }
)


@st.composite
def cases(draw):
    tokens = draw(st.lists(st.integers(0, V - 1), min_size=1, max_size=30))
    p = draw(st.integers(1, len(tokens)))
    return tokens, p, draw(st.integers(0, 8))


@settings(max_examples=300)
@given(case=cases(), kw=options)
def test_equals_brute_force(case, kw):
    tokens, p, k = case
    mag = MaxGram(BIGRAM, **kw)
    got = mag.propose(tokens, p, k)
    want, labels = reference(tokens, p, k, **kw)
    assert got == want and mag.last_sources == labels


@settings(max_examples=100)
@given(
    prompt=st.lists(st.integers(0, V - 1), min_size=1, max_size=15),
    steps=st.lists(
        st.tuples(
            st.integers(0, 12), st.lists(st.integers(0, V - 1), max_size=6), st.integers(0, 6)
        ),
        min_size=1,
        max_size=6,
    ),
    kw=options,
)
def test_cached_calls_equal_fresh_calls(prompt, steps, kw):
    """A sequence of calls that grow, roll back and regrow the sequence (as a cascade
    does) gives what a fresh MaxGram gives on each call."""
    mag = MaxGram(BIGRAM, **kw)
    seq = list(prompt)
    for cut, extra, k in steps:
        seq = seq[: max(len(prompt), len(seq) - cut)] + extra
        fresh = MaxGram(BIGRAM, **kw).propose(seq, len(prompt), k)
        assert mag.propose(seq, len(prompt), k) == fresh


@settings(max_examples=40)
@given(case=cases(), kw=options)
def test_torch_path_is_identical(case, kw):
    tokens, p, k = case
    assert MaxGram(BIGRAM, device="cpu", **kw).propose(tokens, p, k) == MaxGram(
        BIGRAM, **kw
    ).propose(tokens, p, k)


@settings(max_examples=100)
@given(text=st.lists(st.integers(0, 3), max_size=25), query=st.lists(st.integers(0, 3), max_size=8))
def test_suffix_automaton_endpos(text, query):
    """Streaming match length and first/last end positions against direct search."""
    sam = SuffixAutomaton(text)
    state = (0, 0)
    for i, c in enumerate(query):
        state = sam.step(state, c)
        v, m = state
        s = query[: i + 1]
        longest = max((L for L in range(len(s) + 1) if _occurs(text, s[len(s) - L :])), default=0)
        assert m == longest
        if m:
            ends = [e for e in range(len(text)) if e + 1 >= m and text[e + 1 - m : e + 1] == s[-m:]]
            assert (sam.first[v], sam.last[v]) == (ends[0], ends[-1])


def _occurs(text, pattern):
    return any(text[i : i + len(pattern)] == pattern for i in range(len(text) - len(pattern) + 1))


def reference_candidates(s, p, count, occurrence, priority, min_match):
    """The ranked candidates of the module docstring, by brute force."""
    first, label = reference_step(s, p, occurrence, priority, min_match)
    ends = [(_lcs(s, e, e + 1), e, "prompt") for e in range(p - 1)]
    ends += [(_lcs(s, e, e - p + 1), e, "generated") for e in range(p, len(s) - 1)]
    sign = 1 if occurrence == "earliest" else -1
    ends = sorted((x for x in ends if x[0] >= min_match), key=lambda x: (-x[0], sign * x[1]))
    out, labels = [first], [label]
    for _, e, source in ends:
        if s[e + 1] not in out:
            out.append(s[e + 1])
            labels.append(source)
    fallback = int(BIGRAM.next_token[s[-1]])
    if fallback not in out:
        out.append(fallback)
        labels.append("bigram")
    return out[:count], labels[:count]


@settings(max_examples=300)
@given(case=cases(), kw=options)
def test_candidates_equal_brute_force(case, kw):
    """Ranked candidates: the proposal first, then every other occurrence's continuation,
    longest first, then the bigram fallback; distinct."""
    tokens, p, count = case
    mag = MaxGram(BIGRAM, **kw)
    got = mag.candidates(tokens, p, count)
    want, labels = reference_candidates(tokens, p, count, **kw)
    assert got == want and mag.last_sources == labels
    assert len(set(got)) == len(got)
    if count:
        assert got[0] == MaxGram(BIGRAM, **kw).propose(tokens, p, 1)[0]


def test_candidates_rank_other_matches():
    #            prompt: 0 1 2 | 0 3 | 0 1 4 | generated: 0 1
    mag = MaxGram(BIGRAM)
    seq = [0, 1, 2, 0, 3, 0, 1, 4, 0, 1]
    assert mag.candidates(seq, 8, 5) == [2, 4, 0]  # "0 1" twice (earliest first), then bigram
    assert mag.last_sources == ["prompt", "prompt", "bigram"]
    assert mag.candidates(seq, 8, 0) == [] and mag.last_sources == []


def test_paper_example_prompt_copy_then_bigram():
    #            prompt: 0 1 2 3 4 | generated: 1 2
    mag = MaxGram(BIGRAM)
    assert mag.propose([0, 1, 2, 3, 4, 1, 2], 5, 4) == [3, 4, 1, 2]
    # 4 ends the prompt, so it has no continuation there nor in the generated text
    assert mag.last_sources == ["prompt", "prompt", "bigram", "prompt"]
    # token 5 appears nowhere: bigram 5 -> 2, then 2 is matched in the prompt
    assert mag.propose([0, 1, 2, 3, 4, 5], 5, 2) == [2, 3]
    assert mag.last_sources == ["bigram", "prompt"]
    assert MaxGram(BIGRAM).propose([0, 1], 2, 0) == []


def test_is_a_proposer():
    mag = MaxGram(BIGRAM)
    assert isinstance(mag, Proposer) and mag.vocab_size == V and mag.name == "mag"


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([], 1, 1), "non-empty"),
        (([1, 2], 0, 1), "prompt_length"),
        (([1, 2], 3, 1), r"prompt_length must be in \[1, len\(tokens\)=2\]"),
        (([1, 2], 1, -1), "k must be"),
        (([1, V], 1, 1), "tokens must be ids"),
    ],
)
def test_bad_calls(args, match):
    with pytest.raises(ValueError, match=match):
        MaxGram(BIGRAM).propose(*args)


def test_bad_options():
    with pytest.raises(ValueError, match="occurrence"):
        MaxGram(BIGRAM, occurrence="first")
    with pytest.raises(ValueError, match="priority"):
        MaxGram(BIGRAM, priority="any")
    with pytest.raises(ValueError, match="min_match"):
        MaxGram(BIGRAM, min_match=0)
    with pytest.raises(TypeError, match="BigramTable"):
        MaxGram([1, 2])


def test_maxgram_imports_without_torch():
    """Max-Gram is integer work: importing it (and its bigram table) loads neither torch nor
    transformers."""
    import subprocess
    import sys

    code = (
        "import sys, realrun.maxgram, realrun.bigram; "
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
