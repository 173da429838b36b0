"""realrun.measure: α by brute force on tiny models, the position curve, the cost curves,
and the model-set file that ``csd recommend --from`` reads."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ewif.files import model_set as model_io
from realrun.acceptance import measure_acceptance, position_curve
from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.maxgram import MaxGram
from realrun.measure import measure
from realrun.timing import PassTiming, grid
from simulate.decoder.sampling import Decoding

LENIENCES = (1.0, 3.0)
NEW = 8


@pytest.fixture(scope="module")
def chain(tiny_models, tiny_tokenizer):
    from realrun.tiny import PROMPT_TEXTS

    table = BigramTable.from_corpus(PROMPT_TEXTS, tiny_tokenizer)
    return [
        HFTokenModel(tiny_models["target"].model, "target"),
        HFTokenModel(tiny_models["near"].model, "near"),
        HFTokenModel(tiny_models["draft"].model, "draft"),
        MaxGram(table),
    ]


@pytest.fixture(scope="module")
def measured(chain, tiny_prompts):
    return measure(
        chain,
        tiny_prompts[:3],
        max_new_tokens=NEW,
        leniences=LENIENCES,
        max_m=3,
        repeats=2,
        warmup=1,
        progress=False,
    )


def _greedy(model, prompt, steps):
    ids = torch.tensor([prompt])
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=steps,
        min_new_tokens=steps,
        pad_token_id=0,
        eos_token_id=None,
    )
    return out[0, len(prompt) :].tolist()


def test_alpha_equals_brute_force_greedy_match(measured, chain, tiny_models, tiny_prompts):
    """α[0][j] and α_l[1][2] recomputed with plain from-scratch forward passes."""
    target, near, draft = (tiny_models[n].model for n in ("target", "near", "draft"))
    hits = {(0, 1): [], (0, 2): [], (1, 2): [], (0, 3): []}
    lenient = []
    for prompt in tiny_prompts[:3]:
        cont = _greedy(target, prompt, NEW)
        for t in range(NEW):
            prefix = torch.tensor([prompt + cont[:t]])
            z = {
                name: m(prefix).logits[0, -1].double()
                for name, m in (("t", target), ("n", near), ("d", draft))
            }
            hits[(0, 1)].append(int(z["n"].argmax()) == int(z["t"].argmax()))
            hits[(0, 2)].append(int(z["d"].argmax()) == int(z["t"].argmax()))
            hits[(1, 2)].append(int(z["d"].argmax()) == int(z["n"].argmax()))
            mag = chain[3].propose(prompt + cont[:t], len(prompt), 1)[0]
            hits[(0, 3)].append(mag == int(z["t"].argmax()))
            lenient.append(bool(z["n"][int(z["d"].argmax())] + math.log(3.0) >= z["n"].max()))
    for (r, j), h in hits.items():
        assert measured.alpha[1.0][r, j] == pytest.approx(np.mean(h), abs=1e-12)
    assert measured.alpha[3.0][1, 2] == pytest.approx(np.mean(lenient), abs=1e-12)


def test_the_target_is_not_run_again_over_its_continuation(chain, tiny_prompts):
    """The target's scores come from its own generation: one one-row pass per generated
    token and no teacher-forced pass over the continuation (α is still the brute force's,
    above)."""
    target = chain[0]
    target.reset_counters()
    acc = measure_acceptance(
        chain[:2],
        tiny_prompts[:2],
        max_new_tokens=NEW,
        leniences=(1.0,),
        decoding=Decoding(),
        progress=False,
        ranks=0,
    )
    assert set(target.pass_rows) and all(
        target.pass_rows[m] == target.pass_sizes[m] for m in target.pass_sizes
    )
    assert target.passes == sum(len(c) for _, c in acc.contexts)


def _alpha_on(chain, prompts, earlier=None):
    return measure_acceptance(
        chain, prompts, max_new_tokens=NEW, leniences=(1.0,), decoding=Decoding(),
        progress=False, ranks=0, earlier=earlier,
    )  # fmt: skip


def test_earlier_continuations_are_verified_in_one_pass_not_generated(chain, tiny_prompts):
    """α again in other numerics (here the same model) from an earlier greedy measurement:
    one teacher-forced pass of the target per prompt verifies its continuation, and the
    continuations and α are the generation's."""
    first = _alpha_on(chain[:3], tiny_prompts[:3])
    target = chain[0]
    target.reset_counters()
    again = _alpha_on(chain[:3], tiny_prompts[:3], earlier=first)
    assert target.passes == len(first.contexts)
    assert again.contexts == first.contexts
    np.testing.assert_allclose(again.alpha(3)[1.0], first.alpha(3)[1.0], atol=1e-12)


def test_a_continuation_that_breaks_off_is_generated_on_from_there(chain, tiny_prompts):
    """An earlier continuation whose third token the target would not choose: its first two
    tokens are kept, the rest generated, and the result is the fresh measurement's, with as
    many one-position passes as tokens generated."""
    first = _alpha_on(chain[:2], tiny_prompts[:1])
    (prompt, cont), vocab = first.contexts[0], chain[0].vocab_size
    wrong = [*cont[:2], (cont[2] + 1) % vocab, *cont[3:]]
    earlier = replace(first, contexts=[(prompt, wrong)])
    target = chain[0]
    target.reset_counters()
    again = _alpha_on(chain[:2], tiny_prompts[:1], earlier=earlier)
    assert again.contexts == first.contexts
    assert target.passes == 1 + len(cont) - 2
    np.testing.assert_allclose(again.alpha(2)[1.0], first.alpha(2)[1.0], atol=1e-12)


def test_only_a_greedy_measurement_of_the_same_length_is_reused(chain, tiny_prompts):
    first = _alpha_on(chain[:2], tiny_prompts[:2])
    assert first.continuation(0, NEW) == first.contexts[0][1]
    assert first.continuation(0, NEW + 1) is None and first.continuation(5, NEW) is None
    sampled = replace(first, decoding=Decoding(temperature=1.0))
    assert sampled.continuation(0, NEW) is None
    skipping = replace(first, skipped=(0,), contexts=first.contexts[1:])
    assert skipping.continuation(0, NEW) is None
    assert skipping.continuation(1, NEW) == first.contexts[1][1]


def test_alpha_structure(measured):
    a1, a3 = measured.alpha[1.0], measured.alpha[3.0]
    np.testing.assert_array_equal(a1[0], a3[0])  # lenience never at the target
    assert np.isnan(a1[3]).all() and np.isnan(np.diag(a1)).all()  # MaG reviews nothing
    upper = np.triu_indices(4, 1)
    assert ((a1[upper] >= 0) & (a1[upper] <= 1)).all()
    assert (
        a3[1:][np.triu(np.ones((3, 4), bool), 2)] >= a1[1:][np.triu(np.ones((3, 4), bool), 2)]
    ).all()
    assert a1[0, 1] > a1[0, 2]  # the near copy of the target beats a random drafter
    assert set(measured.alpha_by_position) == {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)}
    assert measured.alpha_by_position[(0, 1)][0] == pytest.approx(a1[0, 1])


def test_costs_and_file_round_trip(measured, tmp_path):
    curves = measured.cost_curve
    assert curves is not None and curves[0][0] == 1.0
    assert [c.size for c in curves] == [3, 3, 3, 1]  # m = 1..max_m; Max-Gram per token
    assert all((c > 0).all() for c in curves[:3]) and (measured.cost_per_token == 0).all()
    np.testing.assert_array_equal(measured.cost, [c[0] for c in curves])
    assert measured.cost[3] < 0.5  # Max-Gram is far cheaper than a transformer pass
    path = model_io.save(measured, tmp_path / "m.json")
    again = model_io.load(path)
    assert again.models == ("target", "near", "draft", "mag")
    np.testing.assert_allclose(again.cost, measured.cost)
    for a, b in zip(again.cost_curve, curves, strict=True):
        np.testing.assert_allclose(a, b)
    from ewif.cli import main

    assert main(["recommend", "--from", str(path), "--json"]) == 0


def test_sampling_alpha_is_one_minus_total_variation(chain, tiny_models, tiny_prompts):
    dec = Decoding(temperature=1.0)
    ms = measure(
        chain[:2],
        tiny_prompts[:1],
        max_new_tokens=4,
        leniences=(1.0,),
        max_m=1,
        repeats=1,
        warmup=0,
        decoding=dec,
        seed=3,
        progress=False,
    )
    # the same continuation the measurement sampled (seeded decoder), then 1 - TV per position
    from simulate.decoder.cascade import CascadeDecoder

    prompt = tiny_prompts[0]
    cont = (
        CascadeDecoder([chain[0]], np.zeros((0, 0), int), decoding=dec, seed=3)
        .generate(prompt, 4)
        .tokens
    )
    tvs = []
    for t in range(len(cont)):
        prefix = torch.tensor([prompt + cont[:t]])
        p = torch.softmax(tiny_models["target"].model(prefix).logits[0, -1].double(), -1)
        q = torch.softmax(tiny_models["near"].model(prefix).logits[0, -1].double(), -1)
        tvs.append(1 - 0.5 * float((p - q).abs().sum()))
    assert ms.alpha[1.0][0, 1] == pytest.approx(np.mean(tvs), abs=1e-6)


@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=12), min_size=1, max_size=4))
def test_position_curve_matches_brute_force(seqs):
    """curve[i] = P(a_{t+i-1} | a_t..a_{t+i-2} all accepted), counted over all starts t."""
    arrays = [np.array(s, float) for s in seqs]
    curve = position_curve(arrays, 5)
    for i in range(1, 6):
        num = den = 0
        for s in seqs:
            for t in range(len(s) - i + 1):
                if all(s[t : t + i - 1]):
                    den += 1
                    num += s[t + i - 1]
        if den:
            assert curve[i - 1] == pytest.approx(num / den)
        else:
            assert np.isnan(curve[i - 1])


def test_bad_input(chain, tiny_prompts, tiny_models):
    with pytest.raises(ValueError, match="empty"):
        measure(chain[:2], [tiny_prompts[0], []], progress=False)
    with pytest.raises(ValueError, match="target"):
        measure([chain[3], chain[0]], tiny_prompts[:1], progress=False)
    with pytest.raises(ValueError, match="at least one drafter"):
        measure(chain[:1], tiny_prompts[:1], progress=False)
    with pytest.raises(ValueError, match="lenience"):
        measure(chain[:2], tiny_prompts[:1], leniences=(0.5,), progress=False)
    from realrun.tiny import build_qwen2

    other = HFTokenModel(build_qwen2(32, 1, seed=9, vocab_size=50), "other")
    with pytest.raises(ValueError, match="share one vocabulary"):
        measure([chain[0], other], tiny_prompts[:1], progress=False)


@given(st.integers(1, 200))
def test_grid_is_dense_then_sparse_and_ends_at_max_m(max_m):
    g = grid(max_m)
    assert g[0] == 1 and g[-1] == max_m and list(g) == sorted(set(g))
    assert set(range(1, min(max_m, 6) + 1)) <= set(g)


@given(st.integers(1, 40), st.data())
def test_dense_curve_interpolates_between_grid_points(max_m, data):
    ms = grid(max_m)
    seconds = data.draw(st.lists(st.floats(1e-4, 1.0), min_size=len(ms), max_size=len(ms)))
    timing = PassTiming(ms, tuple(seconds))
    dense = timing.dense()
    assert dense.size == max_m
    for m, s in zip(timing.m, timing.seconds, strict=True):
        assert dense[m - 1] == pytest.approx(s)
    assert dense.min() >= min(timing.seconds) - 1e-12 and dense.max() <= max(timing.seconds) + 1e-12
