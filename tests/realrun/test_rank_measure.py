"""Rank-acceptance rows (realrun.rank_measure) against brute force and the tree verifier's own
law, and ``csd measure``'s ``rank_acceptance`` section on tiny models (p_1 = α exactly)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files.model_set import ModelSet
from realrun.acceptance import measure_acceptance
from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.maxgram import MaxGram
from realrun.rank_measure import greedy_rank_rows, sampling_rank_rows
from simulate.decoder.sampling import Decoding
from simulate.decoder.tree_verify import stage_law

V = 6
logit_rows = st.lists(
    st.lists(st.integers(-3, 3).map(float), min_size=V, max_size=V), min_size=1, max_size=5
)


@settings(max_examples=100)
@given(z_r=logit_rows, z_j=logit_rows, lenience=st.sampled_from([1.0, 2.0, 5.0]))
def test_greedy_rows_are_the_first_candidate_the_reviewer_accepts(z_r, z_j, lenience):
    """Rank b of a neural drafter = the b-th token by its logits (ties by lowest id); the
    row is one-hot at the first that passes ``z_r(x) + log l >= max z_r``."""
    T = min(len(z_r), len(z_j))
    zr, zj = np.array(z_r[:T]), np.array(z_j[:T])
    cands = np.argsort(-zj, axis=-1, kind="stable")[:, :4]
    rows = greedy_rank_rows(zr, cands, lenience)
    for t in range(T):
        order = sorted(range(V), key=lambda x: (-zj[t, x], x))[:4]
        ok = [b for b, x in enumerate(order) if zr[t, x] + math.log(lenience) >= zr[t].max()]
        want = np.zeros(4)
        if ok:
            want[ok[0]] = 1.0
        assert rows[t].tolist() == want.tolist()
    # rank 1 is the chain's greedy test, as realrun.measure scores α
    top = zr[np.arange(T), zj.argmax(-1)] + math.log(lenience) >= zr.max(-1)
    assert rows[:, 0].tolist() == top.astype(float).tolist()


def test_proposer_rows_match_the_verifiers_stage_law():
    """Point-mass candidates: rank b's row is the mass the verifier's own law
    (simulate.decoder.tree_verify.stage_law) puts on that candidate."""
    rng = np.random.default_rng(3)
    for lenience in (1.0, 3.0):
        p = rng.dirichlet(np.ones(V), size=4)
        cands = np.array([[2, 0, 5], [1, -1, -1], [4, 3, 0], [0, 1, 2]])
        rows = sampling_rank_rows(p, None, cands, lenience, 3, rng)
        for t in range(4):
            stages = [(int(x), None) for x in cands[t] if x >= 0]
            law = stage_law(p[t], stages, lenience)
            for b, (x, _) in enumerate(stages):
                assert rows[t, b] == pytest.approx(law[x], abs=1e-12)
        assert (rows.sum(axis=1) <= 1 + 1e-12).all()


def test_drawn_candidates_average_to_the_exact_law():
    """A neural drafter's candidates drawn without replacement: the Monte Carlo rows agree
    with the exact expectation over every ordered draw (V = 4, R = 2) within 5 standard
    errors."""
    rng = np.random.default_rng(7)
    p = np.array([[0.5, 0.2, 0.2, 0.1]])
    q = np.array([[0.1, 0.6, 0.2, 0.1]])
    exact = np.zeros(2)
    for x1, x2 in itertools.permutations(range(4), 2):
        q2 = q[0].copy()
        q2[x1] = 0.0
        weight = q[0, x1] * q2[x2] / q2.sum()
        a1 = min(1.0, p[0, x1] / q[0, x1])
        residual = np.maximum(p[0] - q[0], 0.0)
        residual /= residual.sum()
        a2 = min(1.0, residual[x2] / (q2[x2] / q2.sum()))
        exact += weight * np.array([a1, (1 - a1) * a2])
    draws = 4000
    rows = sampling_rank_rows(p, q, None, 1.0, 2, rng, draws=draws)
    assert rows[0, 0] == pytest.approx(np.minimum(p, q).sum(), abs=5 * 0.5 / math.sqrt(draws))
    assert abs(rows[0, 1] - exact[1]) < 5 * 0.5 / math.sqrt(draws)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_measured_section_starts_with_alpha(tiny_models, tiny_prompts, temperature):
    """``csd measure``'s rank vectors: p_1 equals the pair's α exactly, Σ p <= 1, per-prompt
    sums for the bootstrap, and the model set keeps them through its file format."""
    tokenizer = tiny_models["target"].tokenizer
    mag = MaxGram(BigramTable.from_corpus([tokenizer.decode(p) for p in tiny_prompts], tokenizer))
    models = [
        HFTokenModel(tiny_models["target"].model, "target"),
        HFTokenModel(tiny_models["near"].model, "near"),
        mag,
    ]
    acc = measure_acceptance(
        models,
        tiny_prompts[:3],
        max_new_tokens=10,
        leniences=(1.0, 3.0),
        decoding=Decoding(temperature),
        progress=False,
        ranks=4,
    )
    section = acc.rank_acceptance()
    alpha = acc.alpha(3)
    assert set(section.vectors) == set(acc.runs)
    for (lenience, r, j), vec in section.vectors.items():
        assert vec[0] == alpha[lenience if r else 1.0][r, j]
        assert vec.size == 4 and vec.sum() <= 1 + 1e-9
        table = section.by_prompt[(lenience, r, j)]
        assert table.shape == (3, vec.size + 1)
        assert np.allclose(table[:, :-1].sum(axis=0) / table[:, -1].sum(), vec)
    rebuilt = ModelSet(
        ("target", "near", "mag"),
        cost=np.array([1.0, 1.0, 0.0]),
        cost_per_token=np.zeros(3),
        alpha=alpha,
        rank_acceptance=section,
    )
    again = ModelSet.from_dict(rebuilt.to_dict())
    for key, vec in section.vectors.items():
        assert np.array_equal(again.rank_acceptance.vectors[key], vec)
    assert set(section.presence) == {2}  # Max-Gram only: the neural drafter has all 4
    assert np.array_equal(again.rank_acceptance.presence[2], section.presence[2])


def test_presence_is_the_share_of_positions_with_b_candidates(tiny_models, tiny_prompts):
    """Max-Gram's presence q_b: at every teacher-forced position it finds its match (or the
    bigram's) first, so q_1 = 1, then the share of positions where it found at least b
    distinct continuations, counted here from its own ``candidates``."""
    tokenizer = tiny_models["target"].tokenizer
    mag = MaxGram(BigramTable.from_corpus([tokenizer.decode(p) for p in tiny_prompts], tokenizer))
    models = [HFTokenModel(tiny_models["target"].model, "target"), mag]
    acc = measure_acceptance(
        models,
        tiny_prompts[:2],
        max_new_tokens=12,
        leniences=(1.0,),
        decoding=Decoding(0.0),
        progress=False,
        ranks=3,
    )
    found = [
        len(mag.candidates(list(p + cont[:t]), len(p), 3))
        for p, cont in acc.contexts
        for t in range(len(cont))
    ]
    q = acc.rank_acceptance().presence[1]
    assert q.tolist() == [np.mean([f >= b for f in found]) for b in (1, 2, 3)]
    assert q[0] == 1.0
