"""realrun.measure: α by brute force on tiny models, the position curve, the affine cost fit,
and the model-set file that ``csd recommend --from`` reads."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from ewif import io as model_io
from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.maxgram import MaxGram
from realrun.measure import fit_affine, measure, position_curve
from simulate.tokens.sampling import Decoding

LENIENCES = (1.0, 3.0)
NEW = 8


@pytest.fixture(scope="module")
def chain(tiny_models, tiny_tokenizer):
    from realrun.tiny import PROMPT_TEXTS

    table = BigramTable.from_corpus(PROMPT_TEXTS, tiny_tokenizer)
    return [HFTokenModel(tiny_models["target"].model, "target"),
            HFTokenModel(tiny_models["near"].model, "near"),
            HFTokenModel(tiny_models["draft"].model, "draft"),
            MaxGram(table)]


@pytest.fixture(scope="module")
def measured(chain, tiny_prompts):
    return measure(chain, tiny_prompts[:3], max_new_tokens=NEW, leniences=LENIENCES, max_m=3,
                   repeats=2, warmup=1, progress=False)


def _greedy(model, prompt, steps):
    ids = torch.tensor([prompt])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                         max_new_tokens=steps, min_new_tokens=steps, pad_token_id=0,
                         eos_token_id=None)
    return out[0, len(prompt):].tolist()


def test_alpha_equals_brute_force_greedy_match(measured, chain, tiny_models, tiny_prompts):
    """α[0][j] and α_l[1][2] recomputed with plain from-scratch forward passes."""
    target, near, draft = (tiny_models[n].model for n in ("target", "near", "draft"))
    hits = {(0, 1): [], (0, 2): [], (1, 2): [], (0, 3): []}
    lenient = []
    for prompt in tiny_prompts[:3]:
        cont = _greedy(target, prompt, NEW)
        for t in range(NEW):
            prefix = torch.tensor([prompt + cont[:t]])
            z = {name: m(prefix).logits[0, -1].double() for name, m in
                 (("t", target), ("n", near), ("d", draft))}
            hits[(0, 1)].append(int(z["n"].argmax()) == int(z["t"].argmax()))
            hits[(0, 2)].append(int(z["d"].argmax()) == int(z["t"].argmax()))
            hits[(1, 2)].append(int(z["d"].argmax()) == int(z["n"].argmax()))
            mag = chain[3].propose(prompt + cont[:t], len(prompt), 1)[0]
            hits[(0, 3)].append(mag == int(z["t"].argmax()))
            lenient.append(bool(z["n"][int(z["d"].argmax())] + math.log(3.0) >= z["n"].max()))
    for (r, j), h in hits.items():
        assert measured.alpha[1.0][r, j] == pytest.approx(np.mean(h), abs=1e-12)
    assert measured.alpha[3.0][1, 2] == pytest.approx(np.mean(lenient), abs=1e-12)


def test_alpha_structure(measured):
    a1, a3 = measured.alpha[1.0], measured.alpha[3.0]
    np.testing.assert_array_equal(a1[0], a3[0])  # lenience never at the target
    assert np.isnan(a1[3]).all() and np.isnan(np.diag(a1)).all()  # MaG reviews nothing
    upper = np.triu_indices(4, 1)
    assert ((a1[upper] >= 0) & (a1[upper] <= 1)).all()
    assert (a3[1:][np.triu(np.ones((3, 4), bool), 2)] >= a1[1:][np.triu(np.ones((3, 4), bool),
                                                                         2)]).all()
    assert a1[0, 1] > a1[0, 2]  # the near copy of the target beats a random drafter
    assert set(measured.alpha_by_position) == {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)}
    assert measured.alpha_by_position[(0, 1)][0] == pytest.approx(a1[0, 1])


def test_costs_and_file_round_trip(measured, tmp_path):
    assert measured.cost[0] == 1.0
    assert (measured.cost >= 0).all() and (measured.cost_per_token >= 0).all()
    assert measured.cost[3] < 0.5  # Max-Gram is far cheaper than a transformer pass
    path = model_io.save(measured, tmp_path / "m.json")
    again = model_io.load(path)
    assert again.models == ("target", "near", "draft", "mag")
    np.testing.assert_allclose(again.cost, measured.cost)
    from ewif.cli import main

    assert main(["recommend", "--from", str(path), "--json"]) == 0


def test_sampling_alpha_is_one_minus_total_variation(chain, tiny_models, tiny_prompts):
    dec = Decoding(temperature=1.0)
    ms = measure(chain[:2], tiny_prompts[:1], max_new_tokens=4, leniences=(1.0,), max_m=1,
                 repeats=1, warmup=0, decoding=dec, seed=3, progress=False)
    # the same continuation the measurement sampled (seeded decoder), then 1 - TV per position
    from simulate.tokens.cascade import CascadeDecoder

    prompt = tiny_prompts[0]
    cont = CascadeDecoder([chain[0]], np.zeros((0, 0), int), decoding=dec, seed=3).generate(
        prompt, 4).tokens
    tvs = []
    for t in range(len(cont)):
        prefix = torch.tensor([prompt + cont[:t]])
        p = torch.softmax(tiny_models["target"].model(prefix).logits[0, -1].double(), -1)
        q = torch.softmax(tiny_models["near"].model(prefix).logits[0, -1].double(), -1)
        tvs.append(1 - 0.5 * float((p - q).abs().sum()))
    assert ms.alpha[1.0][0, 1] == pytest.approx(np.mean(tvs), abs=1e-6)


@given(st.floats(0, 1), st.floats(0, 1), st.lists(st.integers(1, 40), min_size=2, max_size=8,
                                                    unique=True))
def test_affine_fit_recovers_a_line(a, b, m):
    fit = fit_affine(m, [a + b * x for x in m])
    assert fit.intercept == pytest.approx(a, abs=1e-9)
    assert fit.slope == pytest.approx(b, abs=1e-9)


def test_affine_fit_clips_a_negative_slope():
    fit = fit_affine([1, 2, 3], [3.0, 2.0, 1.0])
    assert fit.slope == 0.0 and fit.intercept == pytest.approx(2.0)


@given(st.lists(st.lists(st.booleans(), min_size=1, max_size=12), min_size=1, max_size=4))
def test_position_curve_matches_brute_force(seqs):
    """curve[i] = P(a_{t+i-1} | a_t..a_{t+i-2} all accepted), counted over all starts t."""
    arrays = [np.array(s, float) for s in seqs]
    curve = position_curve(arrays, 5)
    for i in range(1, 6):
        num = den = 0
        for s in seqs:
            for t in range(len(s) - i + 1):
                if all(s[t:t + i - 1]):
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


@given(st.floats(0.01, 1), st.floats(0, 1), st.lists(st.floats(-0.5, 0.5), min_size=3,
                                                      max_size=8))
def test_anchored_fit_is_exact_at_the_first_point(t0, b, noise):
    m = list(range(1, len(noise) + 2))
    y = [t0] + [t0 + b * (x - 1) + e for x, e in zip(m[1:], noise, strict=True)]
    fit = fit_affine(m, y, anchored=True)
    assert fit(1) == pytest.approx(t0, abs=1e-12)
    dx = np.array(m[1:]) - 1.0
    dy = np.array(y[1:]) - t0
    assert fit.slope == pytest.approx(max(0.0, dx @ dy / (dx @ dx)), abs=1e-12)
