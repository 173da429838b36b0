"""Prefilled prompts kept for reuse (realrun.prefix_store): the store's bounds and look-ups,
and a transformers model that restores a stored prefill computes what a fresh one does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.hf_model import HFTokenModel
from realrun.prefix_store import MIN_TOKENS, PrefixStore
from realrun.tiny import VOCAB
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.sampling import Decoding


def _prompt(seed: int, length: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(4, VOCAB, length)]


def test_longest_shared_prefix_under_its_tag():
    store = PrefixStore()
    a, b = _prompt(0, 40), _prompt(1, 40)
    store.put(a, "A", 10, tag=2)
    store.put(b, "B", 10, tag=2)
    hit = store.longest([*a[:30], 7, 7], limit=31, tag=2)
    assert hit is not None and hit[0] == 30 and hit[1].payload == "A"
    assert store.longest(a, limit=25, tag=2)[0] == 25  # capped at the limit
    assert store.longest(a, limit=40, tag=1) is None  # another thread count
    assert store.longest(a, limit=40, tag=2, beyond=40 - MIN_TOKENS + 1) is None  # saves too few
    assert store.longest(_prompt(2, 40), limit=40, tag=2) is None
    assert store.hits == 2


def test_short_prefills_are_not_kept():
    store = PrefixStore()
    store.put(_prompt(0, MIN_TOKENS - 1), "short", 1, tag=1)
    assert len(store) == 0


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=20),
    entries=st.integers(1, 5),
    cap=st.integers(1, 120),
)
def test_bounds_hold_and_the_least_recently_used_goes_first(sizes, entries, cap):
    store = PrefixStore(max_entries=entries, max_bytes=cap)
    for i, size in enumerate(sizes):
        store.put(_prompt(i, MIN_TOKENS), i, size, tag=0)
        assert len(store) <= entries and store.nbytes <= cap
    kept = [s.payload for s in store._entries.values()]
    assert kept == sorted(kept)  # in the order they were put (none looked up)
    if sizes[-1] <= cap:
        assert kept[-1] == len(sizes) - 1  # the newest is kept when it fits


@pytest.mark.parametrize("bad", [{"max_entries": 0}, {"max_bytes": 0}, {"max_entries": 1.5}])
def test_bad_bounds(bad):
    with pytest.raises((ValueError, TypeError), match=next(iter(bad))):
        PrefixStore(**bad)


def test_restored_prefill_computes_what_a_fresh_one_does(tiny_models):
    """A model with a store feeds a revisited prompt's prefix no more, and every logit row it
    returns is the storeless model's up to summation order (a cropped prefix's keys were
    computed in a longer pass, as after a rollback); greedy decoding token for token."""
    model = tiny_models["target"].model
    plain = HFTokenModel(model, "plain")
    kept = HFTokenModel(model, "kept", prefix_store=PrefixStore())
    prompts = [_prompt(s, 30 + 5 * s) for s in range(3)]
    for lm in (plain, kept):
        for p in prompts:
            lm.logits(p, 1)
    kept.reset_counters()
    for p in prompts:  # each revisited after the others moved the cache elsewhere
        np.testing.assert_allclose(kept.logits(p, 2), plain.logits(p, 2), rtol=1e-4, atol=1e-4)
    assert kept.tokens_fed == 2 * len(prompts) and kept.prefix_store.hits == len(prompts)
    longer = [*prompts[0], 5, 6, 7]
    np.testing.assert_allclose(
        kept.logits(longer, 1), plain.logits(longer, 1), rtol=1e-4, atol=1e-4
    )
    ar = [
        CascadeDecoder([lm], np.zeros((0, 0), np.int64), decoding=Decoding())
        for lm in (plain, kept)
    ]
    for p in prompts:
        assert ar[1].generate(p, 12).tokens == ar[0].generate(p, 12).tokens


def test_another_thread_count_prefills_anew(tiny_models):
    kept = HFTokenModel(tiny_models["draft"].model, "draft", prefix_store=PrefixStore())
    a, b = _prompt(5, 40), _prompt(6, 40)
    threads = torch.get_num_threads()
    kept.logits(a, 1)
    kept.logits(b, 1)
    try:
        torch.set_num_threads(1 if threads > 1 else 2)
        kept.reset_counters()
        kept.logits(a, 1)
        assert kept.tokens_fed == len(a)
    finally:
        torch.set_num_threads(threads)


def test_a_loaded_family_keeps_its_prefills(tiny_model_dirs):
    from realrun.family import load_family

    family = load_family(
        [str(tiny_model_dirs["target"]), str(tiny_model_dirs["draft"])], device="cpu"
    )
    stores = [m.prefix_store for m in family.chain]
    assert all(isinstance(s, PrefixStore) for s in stores) and stores[0] is not stores[1]
    prompt = _prompt(9, 24)
    family.chain[0].logits(prompt, 1)
    family.chain[0].reset()
    family.chain[0].reset_counters()
    family.chain[0].logits(prompt, 1)
    assert family.chain[0].tokens_fed == 1 and len(stores[1]) == 0


def test_only_prefills_are_kept(tiny_models):
    """A pass that returns all its rows (a timed or reviewing pass) is not a prefill."""
    kept = HFTokenModel(tiny_models["draft"].model, "draft", prefix_store=PrefixStore())
    prompt = _prompt(7, 30)
    kept.logits(prompt, len(prompt))  # every row returned: nothing fed for the cache alone
    kept.logits([*prompt, *_prompt(8, 20)], 20)  # a 20-position pass returning its 20 rows
    assert len(kept.prefix_store) == 0
    kept.logits(_prompt(9, 30), 1)
    assert len(kept.prefix_store) == 1


def test_a_generation_end_kept_serves_its_prefixes(tiny_models):
    """``keep_context`` stores the cache a generation ended with: a pass over any part of that
    text fed onto the prompt then feeds its last position only; a short context is not kept."""
    kept = HFTokenModel(tiny_models["draft"].model, "draft", prefix_store=PrefixStore())
    plain = HFTokenModel(tiny_models["draft"].model, "plain")
    prompt = _prompt(10, 20)
    text = prompt + CascadeDecoder([kept], np.zeros((0, 0), np.int64)).generate(prompt, 24).tokens
    kept.keep_context()
    kept.logits(_prompt(11, 30), 1)  # the cache moves elsewhere
    kept.reset_counters()
    context = text[: len(prompt) + 17]
    np.testing.assert_allclose(
        kept.logits(context, 1), plain.logits(context, 1), rtol=1e-4, atol=1e-4
    )
    assert kept.tokens_fed == 1
    short = HFTokenModel(tiny_models["draft"].model, "short", prefix_store=PrefixStore())
    short.logits(_prompt(12, MIN_TOKENS - 1), 1)
    short.keep_context()
    assert len(short.prefix_store) == 0
