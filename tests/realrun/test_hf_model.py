"""HFTokenModel: the KV-cache contract of TokenModel (rollback == recompute), counters."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.hf_model import HFTokenModel
from realrun.tiny import VOCAB
from simulate.decoder.interface import TokenModel


def _scratch(model, tokens: list[int], n: int) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0, -n:].float().numpy()


# a call: (length, n, how many trailing tokens to overwrite, seed of the overwrite)
calls = st.lists(
    st.tuples(st.integers(1, 40), st.integers(1, 6), st.integers(0, 5), st.integers(0, 99)),
    min_size=1,
    max_size=6,
)


@settings(max_examples=15)
@given(base=st.lists(st.integers(0, VOCAB - 1), min_size=40, max_size=40), plan=calls)
def test_rollback_equals_recompute(tiny_models, base, plan):
    model = tiny_models["target"].model
    lm = HFTokenModel(model, "target")
    for length, n, changed, seed in plan:
        tokens = list(base[:length])
        rng = np.random.default_rng(seed)
        for i in range(max(0, length - changed), length):
            tokens[i] = int(rng.integers(VOCAB))
        n = min(n, length)
        got = lm.logits(tokens, n)
        assert got.dtype == np.float32 and got.shape == (n, VOCAB)
        np.testing.assert_allclose(got, _scratch(model, tokens, n), rtol=1e-4, atol=1e-4)
        assert lm.cached_length == length


def test_counters_follow_the_cache_contract(tiny_models):
    seen = []

    def hook(fed: int, seconds: float) -> None:
        seen.append((fed, seconds))

    lm = HFTokenModel(tiny_models["draft"].model, "draft", timing_hook=hook)
    seq = list(range(4, 16))
    lm.logits(seq[:10], 1)  # from scratch: 10 fed
    lm.logits(seq[:12], 2)  # keeps 10, feeds 2
    lm.logits(seq[:12], 3)  # keeps only 9 (the last 3 are re-fed)
    lm.logits([*seq[:8], 99, 98, 97], 1)  # common prefix 8: rollback, feeds 3
    lm.logits([50, *seq[:5]], 1)  # nothing in common: 6
    assert lm.passes == 5
    assert [f for f, _ in seen] == [10, 2, 3, 3, 6]
    assert lm.tokens_fed == 24 and all(s > 0 for _, s in seen)
    lm.reset_counters()
    lm.reset()
    lm.logits(seq[:3], 1)
    assert (lm.passes, lm.tokens_fed, lm.cached_length) == (1, 3, 3)


def test_kept_rows_reach_the_lm_head_as_a_fresh_tensor(tiny_models):
    # An int ``logits_to_keep`` hands the LM head a view with the whole pass's batch stride,
    # which torch's bfloat16 CPU linear multiplies batch-wise, copying the head's weight on
    # every call (8x slower on Qwen2.5 0.5B; module docstring); index tensors gather the kept
    # rows into a tensor of their own.
    model = tiny_models["target"].model
    seen = []
    handle = model.lm_head.register_forward_pre_hook(
        lambda module, args: seen.append((tuple(args[0].shape), args[0].stride()))
    )
    try:
        lm = HFTokenModel(model, "target")
        seq = list(range(4, 20))
        lm.logits(seq[:10], 1)  # from scratch: 10 fed, 1 row
        lm.logits(seq[:13], 1)  # 3 fed, 1 row: a catch-up pass
        lm.logits(seq[:16], 3)  # 3 fed, 3 rows: a review
    finally:
        handle.remove()
    for (batch, rows, width), stride in seen:
        assert batch == 1 and stride[0] == rows * width  # no stride of a longer pass
    assert [rows for (_, rows, _), _ in seen] == [1, 1, 3]


def test_is_a_token_model(tiny_models):
    lm = HFTokenModel(tiny_models["tiny"].model, "tiny")
    assert isinstance(lm, TokenModel) and lm.vocab_size == VOCAB and lm.name == "tiny"


@pytest.mark.parametrize(
    ("tokens", "n", "match"),
    [
        ([1, 2], 0, "n must be"),
        ([1, 2], 3, r"n must be in \[1, len\(tokens\)=2\]"),
        ([], 1, "n must be"),
        ([1, VOCAB], 1, "tokens must be ids"),
    ],
)
def test_bad_calls(tiny_models, tokens, n, match):
    lm = HFTokenModel(tiny_models["tiny"].model, "tiny")
    with pytest.raises(ValueError, match=match):
        lm.logits(tokens, n)


def test_bad_construction(tiny_models):
    with pytest.raises(TypeError, match="PreTrainedModel"):
        HFTokenModel(object(), "x")
    with pytest.raises(ValueError, match="name"):
        HFTokenModel(tiny_models["tiny"].model, "")
