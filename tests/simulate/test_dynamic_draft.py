"""Dynamic draft length replayed over acceptance traces: a fixed k is trace_replay's plain SD
exactly; transformers' +2/−1 schedule, its cap at the generation's end and its confidence
threshold follow their source step by step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files.bootstrap_data import BootstrapData
from ewif.files.categories import alpha_from_rows
from ewif.files.model_set import ModelSet
from simulate.dynamic_draft import Schedule, replay_schedule
from simulate.trace_replay import replay

CURVES = (np.array([1.0, 1.1, 1.2, 1.4, 1.5, 1.7]), np.array([0.2, 0.25]))


def traced_set(
    traces: list[list[float]], catch_up: bool = True, row: float = 0.0, step: float = 0.0
) -> ModelSet:
    arrays = tuple(np.asarray(t, dtype=float) for t in traces)
    rows = {(1.0, 0, 1): np.array([[a.sum(), a.size] for a in arrays])}
    return ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, 0.2]),
        cost_per_token=np.zeros(2),
        alpha=alpha_from_rows(rows, 2, (1.0,)),
        cost_curve=CURVES,
        catch_up=(False, catch_up),
        row_cost=np.array([0.0, row]),
        row_step=np.array([0.0, step]),
        bootstrap=BootstrapData(rows, None, {(1.0, 0, 1): arrays}),
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=30), min_size=2, max_size=4),
    st.integers(1, 6),
    st.booleans(),
    st.sampled_from([0.0, 0.01]),
)
def test_a_fixed_k_is_trace_replays_plain_sd_exactly(traces, k, catch_up, step):
    """A fixed length is plain SD: the schedule's replay equals the trace replay, with the
    drafter's logit rows and a row step priced."""
    ms = traced_set(traces, catch_up, row=0.03 if catch_up else 0.0, step=step)
    ours = replay_schedule(ms, "d", Schedule.fixed(k))
    theirs = replay(ms, ("t", "d"), [[k]])
    assert ours.speedup == pytest.approx(theirs.speedup, rel=1e-12)
    np.testing.assert_array_equal(ours.tokens, theirs.tokens)


def test_the_heuristic_schedule_adds_two_after_a_full_draft_and_takes_one_otherwise():
    # 12 positions; from 2: draft 2 (all accepted: 3 tokens) -> 4; draft 4 at t = 3, the
    # third is rejected (3 tokens) -> 3; t = 6: draft min(3, 12-6-1=5) = 3, all accepted
    # (4 tokens) -> 5; t = 10: capped at 1, accepted: 2 tokens, done.
    trace = [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1]
    ms = traced_set([trace, trace], catch_up=True)
    rep = replay_schedule(ms, "d", Schedule(2, "heuristic_transient"))
    target = {m + 1: c for m, c in enumerate(rep.passes[0, 0]) if c}
    drafter = {m + 1: c for m, c in enumerate(rep.passes[0, 1]) if c}
    assert target == {3: 1, 5: 1, 4: 1, 2: 1}
    # drafter: 2 + 4 + 3 + 1 passes; after the two full steps the first pass feeds two
    assert drafter == {1: 8, 2: 2} and rep.caught[0, 1] == 2
    assert rep.tokens[0] == 12
    assert np.array_equal(rep.passes[0], rep.passes[1])  # transient: each prompt afresh


def test_the_persistent_heuristic_carries_the_length_to_the_next_generation():
    trace = [1] * 10
    ms = traced_set([trace, trace], catch_up=False)
    persistent = replay_schedule(ms, "d", Schedule(1, "heuristic"))
    transient = replay_schedule(ms, "d", Schedule(1, "heuristic_transient"))
    assert transient.passes[1].tolist() == transient.passes[0].tolist()
    assert persistent.passes[1, 0].sum() < persistent.passes[0, 0].sum()  # fewer, longer steps


def test_a_confidence_threshold_ends_the_draft_after_the_first_unsure_token():
    trace = [1] * 8
    sure = np.array([0.9, 0.2, 0.9, 0.9, 0.9, 0.9, 0.1, 0.9])
    ms = traced_set([trace, trace], catch_up=False)
    rep = replay_schedule(ms, "d", Schedule(20, "constant", 0.4), confidences=[sure, np.ones(8)])
    # prompt 0: draft cut after position 1 (2 tokens, 3 made); t = 3: cut after 6 (4 drafted,
    # 5 made); done at 8. Prompt 1: capped at 7 drafted, 8 made in one step.
    assert {m + 1: c for m, c in enumerate(rep.passes[0, 0]) if c} == {3: 1, 5: 1}
    assert {m + 1: c for m, c in enumerate(rep.passes[1, 0]) if c} == {8: 1}
    with pytest.raises(ValueError, match="needs the drafter's confidence"):
        replay_schedule(ms, "d", Schedule(20, "constant", 0.4))


def test_bad_schedules_and_sets_without_traces_are_refused():
    with pytest.raises(ValueError, match="schedule must be one of"):
        Schedule(5, "adaptive")
    with pytest.raises(ValueError, match="start"):
        Schedule(0)
    ms = traced_set([[1, 0], [0, 1]])
    from dataclasses import replace

    with pytest.raises(ValueError, match="no acceptance traces"):
        replay_schedule(replace(ms, bootstrap=None), "d", Schedule.fixed(2))
    assert Schedule.transformers_default().describe() == "constant from 20, confidence >= 0.4"
    assert Schedule.fixed(3).describe() == "fixed k=3"
