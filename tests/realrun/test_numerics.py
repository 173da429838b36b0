"""realrun.numerics: the staged numerics search on tiny models, and its bound."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files import results as results_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.model_set import ModelSet
from ewif.search.recommendation import recommend
from realrun.invariance import Disagreement, Invariance
from realrun.methods import decide_recommendation, recommendation_record
from realrun.numerics import STAGES, NumericsTrial, measure_numerics
from realrun.numerics_bound import (
    QUICK_NOISE,
    assured_bound,
    fastest,
    floor_curve,
    throughput_bound,
)
from realrun.numerics_choice import check_choice, throughput_interval
from realrun.numerics_trials import EXCLUSIONS, reread_separation, summary
from realrun.pipeline import split_prompts
from realrun.timing import PassTiming
from simulate.decoder.sampling import Decoding

DATA = Path(__file__).parents[2] / "realrun" / "data"


def _target_and_drafter(alpha: float, cost: float) -> ModelSet:
    """A target and one drafter of acceptance ``alpha`` and cost ``cost`` (AR tokens), the
    target's review of two positions at 1.2."""
    matrix = np.full((2, 2), np.nan)
    matrix[0, 1] = alpha
    return ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, cost]),
        cost_per_token=np.zeros(2),
        alpha={1.0: matrix},
        cost_curve=(np.array([1.0, 1.2]), np.array([cost])),
    )


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(0.0, 0.95),
    b=st.floats(0.0, 0.95),
    target=st.lists(st.floats(0.5, 3.0), min_size=4, max_size=4),
    drafter=st.lists(st.floats(0.01, 0.6), min_size=4, max_size=4),
    rise=st.lists(st.floats(0.0, 1.5), min_size=1, max_size=6),
    catch_up=st.booleans(),
    t1=st.floats(0.01, 1.0),
)
def test_no_configuration_beats_the_quick_look_bound(a, b, target, drafter, rise, catch_up, t1):
    """Stage 2: curves that agree with the quick look at m = 1..4 and never go below its
    floor of m >= 2 beyond it give no configuration a throughput max(EWIF*, 1)/t_AR above U
    (t_AR >= the target's one-token pass t1, in seconds)."""
    alpha = np.full((3, 3), np.nan)
    alpha[0, 1], alpha[0, 2], alpha[1, 2] = a, b, 0.5

    def curve(first4):
        y = np.array([1.0, *first4[1:]]) if first4 is target else np.array(first4)
        return np.concatenate([y, y[1:].min() + np.cumsum(rise)])

    true_target, true_drafter = curve(target), curve(drafter)
    model_set = ModelSet(
        models=("t", "d", "e"),
        cost=np.array([1.0, true_drafter[0], 0.0]),
        cost_per_token=np.zeros(3),
        alpha={1.0: alpha},
        cost_curve=(true_target, true_drafter, np.array([0.0])),
        catch_up=(False, catch_up, False),
    )
    rec = recommend(model_set, k_max=4)
    quick = {"t": list(t1 * true_target[:4]), "d": list(t1 * true_drafter[:4])}
    bound = throughput_bound(("t", "d", "e"), {1.0: alpha}, quick, k_max=4, noise=0.0)
    assert max(rec.ewif, 1.0) / t1 <= bound * (1 + 1e-9)
    assert throughput_bound(("t", "d", "e"), {1.0: alpha}, quick, k_max=4) == pytest.approx(
        bound / (1 - QUICK_NOISE)
    )


@settings(max_examples=8, deadline=None)
@given(
    rates=st.lists(st.floats(0.05, 0.95), min_size=3, max_size=3),
    counts=st.lists(st.integers(5, 40), min_size=5, max_size=5),
    target=st.lists(st.floats(1.0, 2.5), min_size=3, max_size=3),
    drafter=st.lists(st.floats(0.02, 0.6), min_size=4, max_size=4),
    slack=st.lists(st.floats(0.0, 0.3), min_size=9, max_size=9),
    seed=st.integers(0, 2**16),
)
def test_no_assured_throughput_beats_the_assured_bound(rates, counts, target, drafter, slack, seed):
    """The assured bound (realrun.numerics_bound): real curves at or above the quick look's
    floors (the target's one-token pass t1 = 0.1 s; an AR token t_AR >= t1), with 1 %
    standard errors, give the recommendation an assured throughput — the 5th percentile of
    its interval, floored at AR, never above its score — at most U_A, which is at most U
    or else no tighter than it need be (both are bounds)."""
    rng = np.random.default_rng(seed)
    pairs = [(0, 1), (0, 2), (1, 2)]
    by_prompt = {}
    alpha = np.full((3, 3), np.nan)
    for (r, j), rate in zip(pairs, rates, strict=True):
        n = np.asarray(counts, dtype=float)
        by_prompt[(1.0, r, j)] = np.column_stack([rng.binomial(counts, rate), n])
        alpha[r, j] = by_prompt[(1.0, r, j)][:, 0].sum() / n.sum()
    t1 = 0.1
    quick = {"t": [t1, *(t1 * np.asarray(target))], "d": list(t1 * np.asarray(drafter))}
    t_ar = t1 * (1 + slack[0])
    seconds_t = np.array(quick["t"][1:]) * (1 + np.asarray(slack[1:4]))
    seconds_d = np.array(quick["d"]) * (1 + np.asarray(slack[4:8]))
    curves = (
        np.concatenate([[1.0], seconds_t / t_ar, [seconds_t.max() / t_ar + slack[8]]]),
        seconds_d / t_ar,
        np.array([0.0]),
    )
    stderr = tuple(0.01 * c for c in curves)
    real = ModelSet(
        models=("t", "d", "mag"),
        cost=np.array([c[0] for c in curves]),
        cost_per_token=np.zeros(3),
        alpha={1.0: alpha},
        cost_curve=curves,
        bootstrap=BootstrapData(by_prompt, stderr),
    )
    rec = recommend(real, k_max=2)
    trial = NumericsTrial("float32", 1, t_ar, "confirmed", max(rec.ewif, 1.0) / t_ar)
    trial = replace(trial, interval=throughput_interval(rec, real, t_ar))
    names = ("t", "d", "mag")
    bound = assured_bound(names, {1.0: alpha}, by_prompt, quick, k_max=2)
    assert trial.assured <= bound * (1 + 1e-9)
    assert bound >= 1.0 / (t1 * (1 - QUICK_NOISE))  # never below the AR it bounds


def test_a_stalled_quick_look_pass_cannot_lower_the_bound():
    """A shipped run's 2-thread candidate was excluded by a stalled quick look (1.17 s for an
    8 ms pass): the quick look keeps each size's fastest timing, so one stall cannot lower
    the bound."""
    alpha = {1.0: np.array([[np.nan, 0.3], [np.nan, np.nan]])}
    clean = PassTiming.of([1, 2, 3, 4], [[0.008, 0.0081], [0.011] * 2, [0.013] * 2, [0.016] * 2])
    stalled = PassTiming.of([1, 2, 3, 4], [[1.17, 0.008], [0.011] * 2, [0.013] * 2, [0.016] * 2])
    assert fastest(stalled) == [0.008, 0.011, 0.013, 0.016]
    bound = throughput_bound(["t", "mag"], alpha, {"t": fastest(stalled)}, k_max=4)
    assert bound == throughput_bound(["t", "mag"], alpha, {"t": fastest(clean)}, k_max=4)
    assert bound > 1.0 / 0.0081  # at least AR's throughput at the unstalled pass


def test_floor_curve_and_its_edges():
    np.testing.assert_allclose(floor_curve([1.0, 1.7, 1.5, 2.0]), [1.0, 1.5, 1.5, 2.0, 1.5])
    np.testing.assert_allclose(floor_curve([2.0, 1.0]), [2.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="quick look"):
        floor_curve([1.0])
    with pytest.raises(ValueError, match="noise"):
        throughput_bound(("t", "d"), {1.0: np.eye(2)}, {"t": [1, 1], "d": [1, 1]}, 2, noise=1.0)


def _bfloat16_flips(monkeypatch):
    """Make every bfloat16 target fail batch invariance by one near-tie (a logit gap of one
    bfloat16 step at a top logit of 20) on top of what it measured."""
    from realrun import numerics

    real = numerics.batch_invariance

    def flipped(model, texts, m=4, max_positions=None):
        inv = real(model, texts, m=m, max_positions=max_positions)
        if model.model.dtype != torch.bfloat16:
            return inv
        tie = Disagreement(0.125, 20.0)
        return Invariance(m, inv.positions, inv.positions - 1, 0.125, (tie,))

    monkeypatch.setattr(numerics, "batch_invariance", flipped)


def _search(tiny_model_dirs, prompt_file, threads="auto", dtype="auto", **options):
    measuring, _ = split_prompts(str(prompt_file), 2, None)
    return measure_numerics(
        [str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"])],
        measuring,
        mag=True,
        bigram=None,
        device="cpu",
        dtype=dtype,
        threads=threads,
        max_new_tokens=6,
        leniences=(1.0,),
        decoding=Decoding(),
        k_max=3,
        max_m=4,
        repeats=3,
        warmup=0,
        screen_repeats=1,
        progress=False,
        **options,
    )


def test_staged_search_accounts_for_every_candidate_and_names_faster_ones(
    tiny_model_dirs, prompt_file, monkeypatch
):
    _bfloat16_flips(monkeypatch)
    measured = _search(tiny_model_dirs, prompt_file)
    trials = measured.trials
    assert sorted((t.dtype, t.threads) for t in trials) == sorted(
        (d, n) for d in ("float32", "bfloat16", "float16") for n in range(1, os.cpu_count() + 1)
    )
    assert {t.stage for t in trials} <= set(STAGES)
    chosen = next(
        t for t in trials if (t.dtype, t.threads) == (measured.family.dtype, measured.threads)
    )
    assert chosen.stage == "confirmed" and chosen.eligible and chosen.excluded_by is None
    assert chosen.dtype != "bfloat16"
    assert all(t.excluded_by in EXCLUSIONS for t in trials if t is not chosen)
    assert all(t.score < chosen.score for t in trials if t.stage == "bound")
    separated = [t for t in trials if t.excluded_by == "separated"]
    # a runner-up separated below stops there; a leader a runner-up separated above keeps
    # its own stop (its short curve, or the precision or cap of its confirmation)
    assert all(t.stopped in ("separated", "precision", "repeats", None) for t in separated)
    assert all(t.rounds == 3 for t in trials if t.stage == "confirmed" or t.stopped == "repeats")
    # a score is judged against the leader's at the time (the leader may be confirmed, and
    # α measured again, later), so one may end up above the choice: the report names it
    faster = [t for t in trials if t.stage != "bound" and t.score > chosen.score]
    for t in trials:
        if t.invariance is not None and t.dtype == "bfloat16":
            assert t.excluded_by == "batch invariance" and not t.eligible
    lines = measured.summary
    assert lines[0].startswith(f"numerics: {chosen.label}, predicted ")
    assert lines[1].startswith(f"why: {len(trials)} candidates in ")
    named = [line for line in lines if line.startswith("faster, not chosen: ")]
    assert len(named) == len(faster)
    assert all(any(t.label in line for line in named) for t in faster)
    meta = measured.model_set.metadata
    assert len(meta["numerics_trials"]) == len(trials) and meta["dtype"] == chosen.dtype
    assert meta["repeats"] == 3 and measured.model_set.cost_curve[0][0] == 1.0
    assert meta["numerics_choice"] == "\n".join(lines)
    assert meta["batch_invariance_rule"] == "strict"
    recorded = {(t["dtype"], t["threads"]): t for t in meta["numerics_trials"]}
    assert all(recorded[(t.dtype, t.threads)]["excluded_by"] == t.excluded_by for t in trials)
    # the account of what the search cost: a candidate's seconds are its rounds and check
    # (none for one stopped by its bound); the chosen numerics alone (one load, α, its rounds
    # and check) are part of the whole
    assert all((t.seconds > 0) == (t.rounds > 0) for t in trials)
    spent = meta["numerics_seconds"]
    alone = spent["chosen numerics alone"]
    assert chosen.seconds < alone < spent["total"]
    assert lines[-1] == (
        f"cost: the chosen numerics alone took {alone:.0f} s of the {spent['total']:.0f} s "
        f"(one load, α, its 3 rounds and its check: what a run given them pays); the search "
        f"added {spent['total'] - alone:.0f} s"
    )


def test_the_quick_look_warms_up_once_per_dtype(tiny_model_dirs, prompt_file, monkeypatch):
    """A warm-up round of every model's quick-look passes at a dtype's first thread count
    only; every other candidate times its passes at once (its first pass warms it)."""
    from realrun import numerics_bound, timing

    seen: list[tuple[str, int, int]] = []

    def recorded(model, context, max_m, repeats, warmup):
        seen.append((str(next(model.model.parameters()).dtype), torch.get_num_threads(), warmup))
        return timing.time_passes(model, context, max_m, repeats, warmup)

    monkeypatch.setattr(numerics_bound, "time_passes", recorded)
    _search(tiny_model_dirs, prompt_file, dtype=("float32", "bfloat16"), threads=(2, 1))
    assert [(d, t) for d, t, w in seen if w] == [
        ("torch.float32", 2),
        ("torch.float32", 2),
        ("torch.bfloat16", 2),
        ("torch.bfloat16", 2),
    ]
    assert {(d, t) for d, t, w in seen if not w} == {("torch.float32", 1), ("torch.bfloat16", 1)}


@pytest.mark.parametrize("room", [True, False])
def test_families_stay_loaded_while_memory_holds_another(
    tiny_model_dirs, prompt_file, monkeypatch, room
):
    """With room for another family every dtype is loaded once; without it the families but
    the leader's are dropped before each load (a dtype may then be loaded again)."""
    from realrun import family, numerics

    loads: list[str] = []

    def counted(sources, **kw):
        loads.append(kw["dtype"])
        return family.load_family(sources, **kw)

    monkeypatch.setattr(numerics, "load_family", counted)
    monkeypatch.setattr(family, "available_memory", lambda: 10**15 if room else 0)
    measured = _search(tiny_model_dirs, prompt_file, dtype=("float32", "bfloat16"), threads=1)
    assert set(loads) == {"float32", "bfloat16"}
    if room:
        assert sorted(loads) == ["bfloat16", "float32"]
    assert measured.model_set.metadata["dtype"] in ("float32", "bfloat16")


def test_room_for_another_family_is_six_bytes_a_parameter(monkeypatch):
    from realrun import family

    assert 0 < family.available_memory() < 2**50

    class Loaded:
        parameters = 1000

    monkeypatch.setattr(family, "available_memory", lambda: 6000)
    assert family.room_for_another([Loaded()]) and family.room_for_another([])
    monkeypatch.setattr(family, "available_memory", lambda: 5999)
    assert not family.room_for_another([Loaded()])


def test_near_ties_rule_admits_a_near_tie(tiny_model_dirs, prompt_file, monkeypatch):
    _bfloat16_flips(monkeypatch)
    measured = _search(tiny_model_dirs, prompt_file, threads=1, batch_invariance="near-ties")
    checked = [t for t in measured.trials if t.invariance is not None]
    assert checked and all(t.eligible for t in checked)
    assert all(t.excluded_by != "batch invariance" for t in measured.trials)
    assert measured.model_set.metadata["batch_invariance_rule"] == "near-ties"
    with pytest.raises(ValueError, match="batch_invariance must be one of strict, near-ties"):
        _search(tiny_model_dirs, prompt_file, threads=1, batch_invariance="loose")


@pytest.mark.parametrize("choice", ["assured", "mean"])
def test_an_unassured_speculative_choice_reads_as_the_ar_the_run_decides(choice):
    """A chosen cascade at EWIF 1.2 whose 90 % interval reaches below AR (EWIF 0.9..1.5): under
    the assured rule the run decodes autoregressively, and the account's first line says so
    with the cascade named; under the mean rule it stays the cascade."""
    rec = recommend(_target_and_drafter(0.6, 0.2), k_max=2)
    assert rec.decision == "speculative"
    ok = Invariance(4, 48, 48, None)
    unit = 0.1
    chosen = NumericsTrial("float16", 2, unit, "confirmed", rec.ewif / unit, rec, ok, rounds=10)
    chosen = replace(chosen, interval=(0.9 / unit, 1.5 / unit), choice=choice)
    first = summary(chosen, [chosen], 60.0)[0]
    if choice == "mean":
        assert f"({rec.best.describe()}, EWIF" in first
        return
    cascade = rec.best.describe()
    assert f"(autoregressive decoding: {cascade} is not assured (EWIF low 0.900" in first
    assert chosen.assured == pytest.approx(1 / unit)  # its AR, the decision's throughput
    safe = replace(chosen, interval=(1.05 / unit, 1.5 / unit))
    assert f"({rec.best.describe()}, EWIF" in summary(safe, [safe], 60.0)[0]


def test_summary_names_a_faster_candidate_and_its_reason():
    rec = recommend(_target_and_drafter(0.6, 0.2), k_max=2)
    ok = Invariance(4, 48, 48, None)
    flip = Invariance(4, 48, 47, 0.125, (Disagreement(0.125, 20.0),))
    chosen = NumericsTrial(
        "float16", 2, 0.139, "confirmed", 7.19, rec, ok, rounds=4, stopped="precision", score_se=0.1
    )
    faster = NumericsTrial(
        "bfloat16", 2, 0.12, "invariance", 8.28, rec, flip, excluded_by="batch invariance",
        rounds=3, stopped="batch invariance", score_se=0.2,
    )  # fmt: skip
    slower = NumericsTrial("float32", 1, 0.5, "bound", 3.0, excluded_by="quick-look bound")
    lines = summary(chosen, [chosen, faster, slower], 120.0)
    assert lines[0].startswith("numerics: float16 × 2 threads, predicted 7.19 ± 0.10 tokens/s")
    assert lines[0].endswith("batch invariance 48/48 agree (strict); 4 rounds, stopped: precision")
    assert lines[1] == (
        "why: 3 candidates in 120 s; excluded: 1 by quick-look bound, 0 by assured bound, "
        "0 by separated, 1 by batch invariance, 0 by lower score, 0 by separated earlier, 0 by tie"
    )
    assert lines[2] == (
        "faster, not chosen: bfloat16 × 2 threads at a predicted 8.28 ± 0.20 tokens/s "
        "(invariance, 3 rounds, stopped: batch invariance): excluded by batch invariance "
        "47/48 agree; 1 disagreement at logit gap 0.125 (1 bfloat16 step) under the strict rule"
    )
    assert len(lines) == 3
    assert summary(chosen, [chosen, faster, slower], 120.0, own=80.4)[3] == (
        "cost: the chosen numerics alone took 80 s of the 120 s (one load, α, its 4 rounds and "
        "its check: what a run given them pays); the search added 40 s"
    )
    assert faster.to_dict()["reason"] == EXCLUSIONS["batch invariance"]
    assert not faster.eligible and replace(faster, rule="near-ties").eligible


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


def test_a_reduced_candidate_set_is_searched_exhaustively(tiny_model_dirs, prompt_file):
    measuring, _ = split_prompts(str(prompt_file), 2, None)
    measured = measure_numerics(
        [str(tiny_model_dirs["target"])],
        measuring,
        mag=True,
        bigram=None,
        device="cpu",
        dtype=("float32", "bfloat16"),
        threads=(1,),
        max_new_tokens=5,
        leniences=(1.0,),
        decoding=Decoding(),
        k_max=2,
        max_m=3,
        repeats=2,
        warmup=0,
        screen_repeats=1,
        exhaustive=True,
        progress=False,
    )
    trials = measured.trials
    assert sorted((t.dtype, t.threads) for t in trials) == [("bfloat16", 1), ("float32", 1)]
    assert all(t.stage == "confirmed" and t.invariance is not None for t in trials)
    assert sum(t.excluded_by is None for t in trials) == 1


@pytest.mark.parametrize(
    ("dtype", "threads"), [(("float32", "float8"), "auto"), ((), "auto"), ("auto", (1, 0))]
)
def test_bad_candidate_sets_are_refused(tiny_model_dirs, prompt_file, dtype, threads):
    with pytest.raises(ValueError, match=r"dtype candidates|threads"):
        _search(tiny_model_dirs, prompt_file, threads=threads, dtype=dtype)


def test_the_choice_says_which_candidates_its_interval_holds():
    """A speculative choice whose lead rests on acceptance from a few prompts: its bootstrap
    throughput interval is reported, naming the measured candidates inside it (not those
    stopped by a bound: their score is a bound, not a prediction); an autoregressive choice
    has no interval."""
    run = results_io.load(DATA / "qwen_bfloat16_searched.json")
    model_set = ModelSet.from_dict(run.metadata["model_set"], "run")
    rec = recommend(model_set, k_max=3)
    assert rec.decision == "speculative"
    ok = Invariance(4, 48, 48, None)
    low, high = throughput_interval(rec, model_set, 0.24)
    assert low < max(rec.ewif, 1.0) / 0.24 < high
    chosen = NumericsTrial("bfloat16", 2, 0.24, "confirmed", 7.6, rec, ok, rounds=10)
    chosen = replace(chosen, interval=(low, high))
    near = NumericsTrial("float16", 2, 0.14, "rounds", (low + high) / 2 - 0.5, rec, ok, rounds=10)
    bound = NumericsTrial(
        "float32", 1, 0.4, "bound", (low + high) / 2, excluded_by="quick-look bound"
    )
    far = NumericsTrial("float16", 1, 0.2, "rounds", low - 1.0, rec, ok, rounds=3)
    lines = summary(chosen, [chosen, near, bound, far], 600.0)
    assert lines[-1].startswith(f"uncertain: the choice's throughput, 90 % interval [{low:.2f}, ")
    assert "inside it: float16 × 2 threads at" in lines[-1] and "float32" not in lines[-1]
    assert "float16 × 1" not in lines[-1]
    hopeless = recommend(_target_and_drafter(0.01, 0.5), k_max=2)
    assert hopeless.decision == "autoregressive"
    assert throughput_interval(hopeless, model_set, 0.24) is None


def test_the_assured_rule_would_have_chosen_float16_in_the_shipped_bfloat16_search():
    """qwen_bfloat16_searched chose (by the mean rule, the only one then) bfloat16 × 2's
    cascade at 7.64 tokens/s over float16 × 2's AR at 7.12; the cascade measured 6.58. Its
    assured throughput — the 5th percentile over the measuring prompts' acceptance — is below
    float16's AR (which has no acceptance to be wrong about), so the assured rule ranks float16
    first; the mean rule, the cascade."""
    run = results_io.load(DATA / "qwen_bfloat16_searched.json")
    model_set = ModelSet.from_dict(run.metadata["model_set"], "run")
    stored = run.metadata["model_set"]["metadata"]["numerics_trials"]
    trials = {t["dtype"]: t for t in stored if t["threads"] == 2}
    rec = recommend(model_set, k_max=12)
    unit = trials["bfloat16"]["ar_seconds_per_token"]
    ok = Invariance(4, 48, 48, None)
    interval = throughput_interval(rec, model_set, unit)
    spec = NumericsTrial("bfloat16", 2, unit, "confirmed", max(rec.ewif, 1) / unit, rec, ok)
    spec = replace(spec, interval=interval, choice="assured")
    f16 = trials["float16"]
    ar = NumericsTrial("float16", 2, f16["ar_seconds_per_token"], "rounds",
                       f16["predicted_tokens_per_s"], None, ok, choice="assured")  # fmt: skip
    assert spec.score > ar.score and spec.assured < ar.assured
    assert spec.assured < 6.58 < spec.score  # the cascade's measured throughput
    assert spec.rank < ar.rank
    assert replace(spec, choice="mean").rank > replace(ar, choice="mean").rank
    with pytest.raises(ValueError, match="choice must be one of assured, mean, got 'best'"):
        check_choice("best")


def test_a_separation_is_re_read_against_the_choices_final_rounds():
    """A three-model search of this project's (docs/findings.md, the numerics search of the
    three-model family, its 648 s run): float16 × 2 was separated below bfloat16 × 2
    while the latter's score was higher; after the choice's full rounds the two are 8.31 ±
    0.23 and 8.49 ± 0.31, within their errors, so the record says the separation was earlier;
    a gap that still holds keeps its label, and other exclusions are untouched."""
    ok = Invariance(4, 48, 48, None)
    chosen = NumericsTrial("bfloat16", 2, 0.199, "confirmed", 8.49, None, ok, rounds=10)
    chosen = replace(chosen, score_se=0.31)
    old = NumericsTrial("float16", 2, 0.120, "confirmed", 8.31, None, ok, rounds=10)
    old = replace(old, score_se=0.23, excluded_by="separated")
    moved = reread_separation(old, chosen)
    assert moved.excluded_by == "separated earlier" and moved.score == old.score
    assert reread_separation(replace(old, score=7.0), chosen).excluded_by == "separated"
    bounded = replace(old, excluded_by="quick-look bound")
    assert reread_separation(bounded, chosen) is bounded
    assert "separated earlier" in EXCLUSIONS


def test_a_futile_runner_up_that_ends_above_the_choice_is_named_a_tie():
    """This release's Xeon search: float32 × 2 stopped as futile behind bfloat16 × 2, whose
    later rounds brought its assured throughput to 4.71 — below float32's 5.01. The record no
    longer says it "ranked below": a tie, kept by the leader measured in full; one still
    below keeps "lower score"."""
    ok = Invariance(4, 48, 48, None)
    chosen = NumericsTrial("bfloat16", 2, 0.258, "confirmed", 4.71, None, ok, rounds=10)
    futile = NumericsTrial("float32", 2, 0.263, "rounds", 5.01, None, ok, rounds=4)
    futile = replace(futile, excluded_by="lower score", stopped="futile")
    assert reread_separation(futile, chosen).excluded_by == "tie"
    below = replace(futile, score=4.5)
    assert reread_separation(below, chosen) is below
    hopeless = recommend(_target_and_drafter(0.01, 0.5), k_max=2)
    trials = [reread_separation(futile, chosen)]
    lines = summary(replace(chosen, recommendation=hopeless), trials, 60.0)
    (faster,) = [line for line in lines if line.startswith("faster, not chosen: ")]
    assert faster.endswith("excluded by " + EXCLUSIONS["tie"])
    assert "1 by tie" in lines[1]


@settings(max_examples=40, deadline=None)
@given(
    unit=st.floats(0.01, 1.0),
    ewif=st.floats(1.0, 3.0),
    low=st.floats(0.3, 3.5),
    width=st.floats(0.0, 1.0),
)
def test_a_candidates_assured_throughput_is_never_below_its_own_ar(unit, ewif, low, width):
    """A candidate can always decode autoregressively (EWIF 1 exactly): its assured figure is
    between its AR's ``1 / t_AR`` and its score, whatever its interval says."""
    ok = Invariance(4, 48, 48, None)
    trial = NumericsTrial("float16", 2, unit, "confirmed", ewif / unit, None, ok)
    trial = replace(trial, interval=(low / unit, (low + width) / unit))
    assert 1.0 / unit * (1 - 1e-12) <= trial.assured <= trial.score * (1 + 1e-12)
    if low < 1.0:
        assert trial.assured == pytest.approx(1.0 / unit)


def test_the_results_file_keeps_the_decision_under_the_rule():
    """The held-out Qwen llama.cpp run on open-ended categories (writing, translation,
    summaries, none measured): its best cascade, at EWIF 1.042, ran 0.891x AR. The assured
    rule decoded autoregressively, naming the cascade and its interval; the mean's runs it."""
    run = results_io.load(DATA / "cpu_results_qwen_xeon_open_llamacpp.json")
    model_set = ModelSet.from_dict(run.metadata["model_set"], "run")
    rec = recommend(model_set, k_max=12)
    assert rec.decision == "speculative" and 1.0 < rec.ewif < 1.05
    assured = recommendation_record(rec, decide_recommendation(model_set, rec, "assured"))
    assert assured["decision"] == "autoregressive" and assured["decision_rule"] == "assured"
    low, high = assured["interval"]
    assert low < 1.0 < high
    assert assured["describe"].startswith("decode autoregressively: CSD ")
    assert "is not assured" in assured["describe"]
    mean = recommendation_record(rec, decide_recommendation(model_set, rec, "mean"))
    assert mean["decision"] == "speculative" and "interval" not in mean
    assert mean["describe"].startswith("recommended: CSD ")
    assert run.metadata["recommendation"]["decision"] == "autoregressive"
