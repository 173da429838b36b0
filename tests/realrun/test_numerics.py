"""realrun.numerics: the staged numerics search on tiny models, and its bound."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files.model_set import ModelSet
from ewif.search.recommendation import recommend
from realrun.invariance import Invariance
from realrun.numerics import STAGES, NumericsTrial, measure_numerics, throughput_bound
from realrun.pipeline import split_prompts
from simulate.decoder.sampling import Decoding


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(0.0, 0.95),
    b=st.floats(0.0, 0.95),
    two=st.floats(0.3, 2.0),
    rise=st.lists(st.floats(0.0, 1.5), min_size=1, max_size=6),
    drafter=st.floats(0.0, 0.5),
)
def test_no_configuration_beats_the_two_pass_bound(a, b, two, rise, drafter):
    """Stage 2: with the target's curve never below min(c(1), c(2)), the recommended
    configuration's throughput max(EWIF*, 1)/t(1) is at most U (t(1) = 1 here)."""
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[0, 2], alpha[1, 2] = a, b, 0.5
    curve = np.concatenate([[1.0, two], min(1.0, two) + np.cumsum(rise)])
    model_set = ModelSet(
        models=("t", "d", "e"),
        cost=np.array([1.0, drafter, 0.0]),
        cost_per_token=np.zeros(3),
        alpha={1.0: alpha},
        cost_curve=(curve, np.array([drafter, 2 * drafter]), np.array([0.0])),
    )
    rec = recommend(model_set, k_max=4)
    assert max(rec.ewif, 1.0) <= throughput_bound(max(a, b), 1.0, two) * (1 + 1e-12)


def test_bound_edges():
    assert throughput_bound(1.0, 0.1, 0.2) == float("inf")
    assert throughput_bound(0.0, 0.5, 0.25) == pytest.approx(4.0)


def test_staged_search_accounts_for_every_candidate(tiny_model_dirs, prompt_file):
    measuring, _ = split_prompts(str(prompt_file), 2, None)
    measured = measure_numerics(
        [str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"])],
        measuring,
        mag=True,
        bigram=None,
        device="cpu",
        dtype="auto",
        threads="auto",
        max_new_tokens=6,
        leniences=(1.0,),
        decoding=Decoding(),
        k_max=3,
        max_m=4,
        repeats=3,
        warmup=0,
        screen_repeats=1,
        progress=False,
    )
    trials = measured.trials
    assert sorted((t.dtype, t.threads) for t in trials) == sorted(
        (d, n) for d in ("float32", "bfloat16", "float16") for n in range(1, os.cpu_count() + 1)
    )
    assert {t.stage for t in trials} <= set(STAGES)
    chosen = next(
        t for t in trials if (t.dtype, t.threads) == (measured.family.dtype, measured.threads)
    )
    confirmed = [t for t in trials if t.stage == "confirmed"]
    best = max(t.score for t in confirmed)
    assert chosen.stage == "confirmed" and chosen.eligible
    checked = [t for t in confirmed if t.invariance is not None]
    assert all(t.score <= chosen.score or not t.eligible for t in checked)
    assert all(t.score < best for t in trials if t.stage == "bound")
    assert all(t.score < 0.85 * best for t in trials if t.stage == "short curve")
    meta = measured.model_set.metadata
    assert len(meta["numerics_trials"]) == len(trials) and meta["dtype"] == chosen.dtype
    assert meta["repeats"] == 3 and measured.model_set.cost_curve[0][0] == 1.0
    first, why = measured.summary
    assert first.startswith(f"numerics: {chosen.label}, predicted ") and why.startswith(
        f"why: {len(trials)} candidates in "
    )
    assert meta["numerics_choice"] == f"{first}\n{why}"


def test_given_numerics_measure_one_candidate_in_full(tiny_model_dirs, prompt_file):
    measuring, _ = split_prompts(str(prompt_file), 2, None)
    measured = measure_numerics(
        [str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"])],
        measuring,
        mag=False,
        bigram=None,
        device="cpu",
        dtype="float32",
        threads=1,
        max_new_tokens=5,
        leniences=(1.0,),
        decoding=Decoding(),
        k_max=2,
        max_m=3,
        repeats=2,
        warmup=0,
        progress=False,
    )
    meta = measured.model_set.metadata
    assert measured.trials == [] and measured.summary == ()
    assert meta["numerics_choice"] == "given" and meta["repeats"] == 2
    assert meta["batch_invariance"]["positions"] > 0


def test_trial_scores_autoregressive_throughput_when_nothing_wins():
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = 0.6
    slow = ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, 0.9]),
        cost_per_token=np.zeros(2),
        alpha={1.0: alpha},
        cost_curve=(np.array([1.0, 1.9, 2.8]), np.array([0.9])),
    )
    rec = recommend(slow, k_max=2)
    trial = NumericsTrial("float32", 1, 0.5, "confirmed", 1 / 0.5, rec, Invariance(4, 8, 8, None))
    assert trial.eligible and trial.to_dict()["predicted_tokens_per_s"] == pytest.approx(2.0)
    bound = NumericsTrial("float16", 2, 0.5, "bound", 3.0).to_dict()
    assert bound["upper_bound_tokens_per_s"] == 3.0 and "eligible" not in bound
