"""Bigram tables: corpus counts against brute force, distillation, file round trip."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.bigram import BigramTable
from realrun.tiny import VOCAB, WORDS, build_tokenizer

TOKENIZER = build_tokenizer()


def _brute(texts: list[str]) -> np.ndarray:
    pairs, unigrams = Counter(), Counter()
    for text in texts:
        ids = TOKENIZER(text, add_special_tokens=False)["input_ids"]
        unigrams.update(ids)
        pairs.update(pairwise(ids))
    top = min(unigrams, key=lambda t: (-unigrams[t], t))
    table = []
    for a in range(VOCAB):
        succ = [(c, b) for (x, b), c in pairs.items() if x == a]
        table.append(min(succ, key=lambda cb: (-cb[0], cb[1]))[1] if succ else top)
    return np.array(table)


words = st.lists(st.sampled_from(WORDS[4:20]), min_size=1, max_size=12)


@settings(max_examples=30)
@given(st.lists(words, min_size=1, max_size=5))
def test_corpus_counts_equal_brute_force(docs):
    texts = [" ".join(d) for d in docs]
    table = BigramTable.from_corpus(texts, TOKENIZER)
    assert table.origin == "corpus" and table.vocab_size == VOCAB
    np.testing.assert_array_equal(table.next_token, _brute(texts))


def test_distilled_table_is_the_models_greedy_successor(tiny_models):
    model = tiny_models["tiny"].model
    table = BigramTable.from_model(model, tiny_models["tiny"].tokenizer, batch_size=7)
    checked = np.random.default_rng(0).choice(VOCAB, size=20, replace=False)
    with torch.no_grad():
        want = [int(model(torch.tensor([[int(a)]])).logits[0, -1].argmax()) for a in checked]
    np.testing.assert_array_equal(table.next_token[checked], want)
    assert table.vocab_size == VOCAB and table.origin == "model"


def test_file_round_trip_checks_the_vocabulary(tmp_path, tiny_tokenizer):
    table = BigramTable.from_corpus(["the cats and the dogs", "the cats"], tiny_tokenizer)
    path = table.save(tmp_path / "bigram.npz")
    back = BigramTable.load(path, tiny_tokenizer)
    np.testing.assert_array_equal(back.next_token, table.next_token)
    assert back.vocab_hash == table.vocab_hash
    assert back(WORDS.index("the")) == WORDS.index("cats")
    other = build_tokenizer()
    other.add_tokens(["zebra"])
    with pytest.raises(ValueError, match="built for another vocabulary"):
        BigramTable.load(path, other)
    np.savez(tmp_path / "other.npz", next_token=np.zeros(3, np.int64))
    with pytest.raises(ValueError, match=r"not a csd\.bigram/1 file"):
        BigramTable.load(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError):
        BigramTable.load(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match=r"\.npz"):
        table.save(tmp_path / "bigram.bin")


def test_bad_tables():
    with pytest.raises(ValueError, match="empty corpus"):
        BigramTable.from_corpus(["", "   "], TOKENIZER)
    with pytest.raises(ValueError, match="ids in"):
        BigramTable(np.array([0, 5]), "h", "x")
    with pytest.raises(ValueError, match="1-d integer"):
        BigramTable(np.array([[0]]), "h", "x")
    with pytest.raises(ValueError, match="vocab_size must exceed"):
        BigramTable.from_corpus(["the cat"], TOKENIZER, vocab_size=3)
