"""realrun.numerics_rounds: the sequential rules that stop a numerics candidate's rounds, on
their own and driving the search (:class:`realrun.numerics._Search`) over stub families whose
rounds time scripted AR seconds."""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import cycle
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ewif.files.model_set import ModelSet
from ewif.search.recommendation import recommend
from realrun.invariance import Disagreement, Invariance
from realrun.measure import Costs
from realrun.numerics import _Search
from realrun.numerics_rounds import (
    FUTILITY_POWER,
    MIN_ROUNDS,
    PRECISION,
    SEPARATION_Z,
    STOPS,
    confirmation_stop,
    futile,
    race_verdict,
    score_stderr,
    separation,
)
from realrun.numerics_settings import SearchSettings
from realrun.numerics_trials import EXCLUSIONS, Candidate, NumericsTrial, summary
from realrun.pass_timing import FamilyTiming, per_token
from simulate.decoder.sampling import Decoding

TOKENS = 32


def test_separation_needs_the_rounds_and_the_z_standard_errors():
    assert separation(9.0, 0.1, MIN_ROUNDS, 10.0, 0.1, MIN_ROUNDS) == "below"
    assert separation(11.0, 0.1, MIN_ROUNDS, 10.0, 0.1, MIN_ROUNDS) == "above"
    assert separation(9.0, 0.1, MIN_ROUNDS - 1, 10.0, 0.1, MIN_ROUNDS) is None
    edge = SEPARATION_Z * np.hypot(0.3, 0.4)  # 0.8225
    assert separation(10.0 - edge * 0.99, 0.3, 5, 10.0, 0.4, 5) is None
    assert separation(10.0 - edge * 1.01, 0.3, 5, 10.0, 0.4, 5) == "below"


@given(
    rounds=st.integers(0, 40),
    rse=st.floats(0.0, 0.2),
    spent=st.floats(0.0, 100.0),
    repeats=st.integers(1, 10),
    min_seconds=st.floats(0.0, 100.0),
)
def test_confirmation_stops_only_at_precision_or_the_cap(rounds, rse, spent, repeats, min_seconds):
    why = confirmation_stop(rounds, rse, spent, repeats, min_seconds)
    if spent < min_seconds and rounds < 4 * repeats:
        assert why is None
    elif why == "precision":
        assert rounds >= MIN_ROUNDS and rse <= PRECISION
    elif why == "repeats":
        assert rounds >= repeats
    else:
        assert why is None and rounds < repeats and (rounds < MIN_ROUNDS or rse > PRECISION)


def test_futility_is_the_conditional_power_at_the_cap():
    """The staged search's tie (bfloat16's assured 6.90 ± 0.15 after its 3-round short curve,
    float16's 7.00 ± 0.27 over 10): at the cap the bar is 1.645 · 0.28 = 0.46 against a gap
    of 0.10 — futile at once; a gap near the bar, or too few rounds, is not."""
    tie = ((0.146, 3), (0.27, 10))
    assert futile(0.10, tie, 10)
    assert not futile(0.10, ((0.146, 2), (0.27, 10)), 10)  # fewer than MIN_ROUNDS
    assert not futile(0.45, tie, 10)  # a gap near the cap's bar
    assert futile(0.1, ((0.1, 10), (0.1, 10)), 10)  # at the cap: futile where not separated
    assert race_verdict(6.90, 0.146, 3, 7.00, 0.27, 10, 10) == "futile"
    assert race_verdict(7.10, 0.146, 3, 7.00, 0.27, 10, 10) is None  # ahead: measured on
    assert race_verdict(6.0, 0.05, 3, 7.00, 0.05, 10, 10) == "below"


@given(
    gap=st.floats(0.0, 2.0),
    se=st.floats(0.01, 1.0),
    lead_se=st.floats(0.01, 1.0),
    rounds=st.integers(MIN_ROUNDS, 12),
    lead_rounds=st.integers(MIN_ROUNDS, 12),
    repeats=st.integers(MIN_ROUNDS, 12),
)
def test_futility_matches_its_normal_projection(gap, se, lead_se, rounds, lead_rounds, repeats):
    """Futile iff Φ((|d| − z·SE_N) / σ_rest) < FUTILITY_POWER, SE_N the difference's error
    projected to the cap and σ_rest that of the rounds to come; a wider gap is never more
    futile."""
    errors = ((se, rounds), (lead_se, lead_rounds))
    share = [n / max(n, repeats) for n in (rounds, lead_rounds)]
    at_cap = [e * e * f for e, f in zip((se, lead_se), share, strict=True)]
    bar = SEPARATION_Z * sum(at_cap) ** 0.5
    rest = sum(v * (1 - f) for v, f in zip(at_cap, share, strict=True)) ** 0.5
    expected = gap <= bar if rest == 0 else NormalDist().cdf((gap - bar) / rest) < FUTILITY_POWER
    assert futile(gap, errors, repeats) == expected
    if futile(gap + 0.5, errors, repeats):
        assert futile(gap, errors, repeats)


def test_score_stderr_is_the_units_relative_error():
    assert score_stderr(10.0, 0.1, 0.002) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="AR unit"):
        score_stderr(10.0, 0.0, 0.1)


# ---------------------------------------------------------------- the search on stub families
class _StubSearch(_Search):
    """The search's stage logic over scripted rounds: candidate ``(dtype, threads)``'s
    rounds decode ``TOKENS`` tokens in the seconds ``script[(dtype, threads)]`` cycles
    through; its score is ``1 / t_AR`` (autoregressive decoding), or for a candidate in
    ``speculative`` — ``(dtype, threads) -> (EWIF, low)`` — ``EWIF / t_AR`` with the throughput
    interval ``[low, 1.1]·EWIF / t_AR``; bfloat16 targets fail batch invariance when ``flips``;
    ``choice`` is the choice rule."""

    def __init__(self, script, repeats=10, flips=False, speculative=None, choice="assured"):
        settings = SearchSettings(
            tuple(dict.fromkeys(d for d, _ in script)),
            tuple(dict.fromkeys(t for _, t in script)),
            TOKENS, (1.0,), Decoding(), k_max=2, max_m=2, repeats=repeats, warmup=1,
            choice=choice,
        )  # fmt: skip
        self.speculative = speculative or {}
        super().__init__(settings, [], lambda dtype: None)
        self.script = {key: cycle(seconds) for key, seconds in script.items()}
        self.labels = {d: d for d in settings.dtypes}
        self.flips = flips
        self.timed_rounds: dict[tuple[str, int], int] = {}
        self.assured_bounds: dict[tuple[str, int], float] = {}
        self.candidates = [Candidate(d, t) for d, t in script]

    def family_of(self, c):
        self.current = (c.dtype, c.threads)

    def _costs(self, family, rounds, offset):
        seconds = tuple(next(self.script[self.current]) for _ in range(rounds))
        self.timed_rounds[self.current] = self.timed_rounds.get(self.current, 0) + rounds
        timing = FamilyTiming({}, None, (TOKENS,) * rounds, seconds, contexts=(1,) * rounds)
        return Costs(("t",), timing, {}, 1, rounds, 0)

    def scored(self, c, stage, held=None):  # scripted recommendations: _AR or _SPECULATIVE
        unit, se = per_token(c.costs.family.ar_tokens, c.costs.family.ar_seconds)
        invariance, stopped = (
            (None, None) if c.trial is None else (c.trial.invariance, c.trial.stopped)
        )
        ewif, low = self.speculative.get((c.dtype, c.threads), (1.0, None))
        value = ewif / unit
        c.trial = replace(
            self.trial(c, stage, value, unit),
            recommendation=_AR if low is None else _SPECULATIVE,
            interval=None if low is None else (low * value, 1.1 * value),
            score_se=score_stderr(value, unit, se),
            rounds=c.rounds,
            invariance=invariance,
            stopped=stopped,
        )
        return c.trial

    def assured_bound_of(self, c):  # scripted: ``assured_bounds``, else no bound
        return self.assured_bounds.get((c.dtype, c.threads), math.inf)

    def check_invariance(self, c):
        bad = self.flips and c.dtype == "bfloat16"
        inv = _FLIP if bad else Invariance(4, 48, 48, None)
        c.trial = replace(c.trial, invariance=inv)
        return not bad

    def run(self):
        for c in self.candidates:
            self.run_candidate(c)
        self.revisit()
        return self.choose()


def _recommendation(alpha, drafter_cost):
    """The recommendation of a target and one drafter: ``alpha = 0.1`` at cost 0.9 decodes
    autoregressively; ``alpha = 0.8`` at cost 0.05 speculates."""
    matrix = np.full((2, 2), np.nan)
    matrix[0, 1] = alpha
    pair = ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, drafter_cost]),
        cost_per_token=np.zeros(2),
        alpha={1.0: matrix},
        cost_curve=(np.array([1.0, 1.05]), np.array([drafter_cost])),
    )
    return recommend(pair, k_max=2)


_AR = _recommendation(0.1, 0.9)
_SPECULATIVE = _recommendation(0.8, 0.05)
_FLIP = Invariance(4, 48, 47, 0.125, (Disagreement(0.125, 20.0),))


def _rounds(unit, spread):
    """A round's seconds for ``TOKENS`` tokens at ``unit`` s/token, ± ``spread`` in turn."""
    return [TOKENS * unit * (1 + spread), TOKENS * unit * (1 - spread), TOKENS * unit]


def _trials(search):
    return {(c.dtype, c.threads): c.trial for c in search.candidates}


def test_a_clearly_separated_runner_up_stops_after_its_short_curve():
    search = _StubSearch(
        {("float16", 2): _rounds(0.100, 0.01), ("bfloat16", 2): _rounds(0.150, 0.01)}
    )
    chosen = search.run()
    t = _trials(search)
    assert (chosen.dtype, chosen.threads) == ("float16", 2)
    runner = t[("bfloat16", 2)]
    assert runner.excluded_by == "separated" and runner.stopped == "separated"
    assert runner.stage == "short curve" and runner.rounds == MIN_ROUNDS
    assert search.timed_rounds[("bfloat16", 2)] == MIN_ROUNDS + 1  # + its warm-up
    assert runner.invariance is None  # stopped before the invariance check
    assert runner.to_dict()["reason"] == EXCLUSIONS["separated"]


def test_an_unseparated_runner_up_behind_stops_when_the_cap_could_not_separate_it():
    """1 % slower than the leader with ±5 % a round: never separated, and after a few rounds
    the cap could not separate it either — futile, excluded as at the cap (lower score)."""
    search = _StubSearch(
        {("float16", 2): _rounds(0.100, 0.01), ("bfloat16", 2): _rounds(0.101, 0.05)}
    )
    search.run()
    runner = _trials(search)[("bfloat16", 2)]
    assert MIN_ROUNDS < runner.rounds < 10 and runner.stopped == "futile"
    assert runner.excluded_by == "lower score" and runner.stage == "rounds"
    assert runner.invariance is not None
    assert runner.to_dict()["stopped_because"] == STOPS["futile"]


def test_an_unseparated_runner_up_ahead_is_measured_to_the_cap():
    """1 % faster, within its ±5 % noise: ahead is never futile (early noise must not displace
    the leader), so it is measured to the cap and, ahead there, leads."""
    search = _StubSearch(
        {("float16", 2): _rounds(0.100, 0.01), ("bfloat16", 2): _rounds(0.099, 0.05)}
    )
    chosen = search.run()
    t = _trials(search)
    assert (chosen.dtype, chosen.threads) == ("bfloat16", 2) and chosen.trial.rounds == 10
    assert t[("float16", 2)].excluded_by == "lower score"


def test_a_runner_up_that_overtakes_leads_and_is_confirmed():
    search = _StubSearch(
        {("float16", 2): _rounds(0.150, 0.01), ("bfloat16", 2): _rounds(0.100, 0.01)}
    )
    chosen = search.run()
    t = _trials(search)
    assert (chosen.dtype, chosen.threads) == ("bfloat16", 2)
    assert t[("float16", 2)].excluded_by == "separated"
    assert t[("bfloat16", 2)].stage == "confirmed" and t[("bfloat16", 2)].excluded_by is None


def test_a_leader_checked_by_a_bound_stops_at_the_stated_precision_the_chosen_at_repeats():
    search = _StubSearch({("float16", 2): _rounds(0.100, 0.04), ("float16", 1): _rounds(0.2, 0)})
    lead, other = search.candidates
    search.run_candidate(lead)
    other.bound = 1.0  # below the leader's score: checked against a confirmed leader
    search.quick[("float16", 1)] = {"t": [0.2, 0.3, 0.4, 0.5]}
    search.run_candidate(other)
    assert search.deferred == [other] and other.trial is None and lead.rounds == MIN_ROUNDS
    search.revisit()
    assert other.trial.excluded_by == "quick-look bound" and not search.deferred
    t = lead.trial
    assert t.stage == "confirmed" and t.stopped == "precision" and MIN_ROUNDS < t.rounds < 10
    seconds = _rounds(0.100, 0.04) * 10

    def rse(n):
        unit, se = per_token([TOKENS] * n, seconds[:n])
        return se / unit

    assert rse(t.rounds) <= PRECISION < rse(t.rounds - 1)
    assert t.to_dict()["stopped_because"] == STOPS["precision"]
    # chosen, it is measured to repeats, as given numerics are: its curves are the run's
    assert search.choose() is lead
    assert lead.trial.rounds == 10 and lead.trial.stopped == "repeats"
    assert search.timed_rounds[("float16", 2)] == 10 + 1  # + its warm-up


def test_the_report_names_each_faster_excluded_candidate_and_its_reason():
    script = {
        ("float16", 2): _rounds(0.100, 0.01),
        ("bfloat16", 2): _rounds(0.080, 0.01),  # faster, fails batch invariance
        ("float16", 1): _rounds(0.200, 0.01),  # slower, separated
    }
    search = _StubSearch(script, flips=True)
    chosen = search.run()
    t = _trials(search)
    assert (chosen.dtype, chosen.threads) == ("float16", 2)
    assert t[("bfloat16", 2)].excluded_by == "batch invariance"
    assert t[("float16", 1)].excluded_by == "separated"
    lines = summary(chosen.trial, list(t.values()), 60.0)
    assert "10 rounds, stopped: repeats" in lines[0] and " ± " in lines[0]
    assert "1 by separated, 1 by batch invariance" in lines[1]
    faster = [line for line in lines if line.startswith("faster, not chosen: ")]
    assert len(faster) == 1
    assert faster[0].startswith("faster, not chosen: bfloat16 × 2 threads at a predicted 12.50")
    assert "(invariance, 3 rounds, stopped: batch invariance)" in faster[0]
    assert faster[0].endswith(
        "47/48 agree; 1 disagreement at logit gap 0.125 (1 bfloat16 step) under the strict rule"
    )


def test_the_exhaustive_baseline_measures_every_candidate_to_the_cap():
    script = {("float16", 2): _rounds(0.100, 0.01), ("bfloat16", 2): _rounds(0.150, 0.01)}
    search = _StubSearch(script)
    search.settings = replace(search.settings, exhaustive=True)
    chosen = search.run()
    assert (chosen.dtype, chosen.threads) == ("float16", 2)
    t = _trials(search)
    assert all(x.rounds == 10 and x.stopped == "repeats" for x in t.values())
    assert t[("bfloat16", 2)].excluded_by == "lower score"


def test_an_overtaken_leader_is_never_confirmed():
    """The first eligible candidate leads on its short curve; the faster runner-up separates
    above it and is the one confirmed: the old leader keeps its short curve's rounds."""
    search = _StubSearch(
        {("bfloat16", 2): _rounds(0.150, 0.01), ("float16", 2): _rounds(0.100, 0.01)}
    )
    search.settings = replace(search.settings, counts=(2, 1))  # a search, not given numerics
    chosen = search.run()
    t = _trials(search)
    assert (chosen.dtype, chosen.threads) == ("float16", 2) and chosen.trial.stage == "confirmed"
    assert t[("bfloat16", 2)].rounds == MIN_ROUNDS and t[("bfloat16", 2)].stage != "confirmed"
    assert search.timed_rounds[("bfloat16", 2)] == MIN_ROUNDS + 1  # + its warm-up


def test_a_bound_is_checked_against_a_confirmed_leader():
    """A leader whose short curve was lucky (10 tokens/s, then rounds at 5): a candidate whose
    quick-look bound (9) is below the short curve's score is not excluded by it, because the
    leader is confirmed first and its confirmed score is below the bound."""
    lucky = [TOKENS * 0.1, *_rounds(0.1, 0.1)] + [TOKENS * 0.2] * 40  # warm-up, 3 fast, slow
    search = _StubSearch({("float16", 2): lucky, ("float16", 1): _rounds(0.105, 0.01)})
    search.settings = replace(search.settings, counts=(2, 1))
    search.candidates[1].bound = 9.0
    search.quick[("float16", 1)] = {"t": [0.105, 0.2, 0.3, 0.4]}
    chosen = search.run()
    t = _trials(search)
    assert t[("float16", 2)].stage == "confirmed" and t[("float16", 2)].score < 9.0
    assert t[("float16", 1)].excluded_by != "quick-look bound"
    assert (chosen.dtype, chosen.threads) == ("float16", 1)


@pytest.mark.parametrize("choice", ["assured", "mean"])
def test_a_speculative_lead_resting_on_acceptance_is_weighed_by_the_choice_rule(choice):
    """bfloat16's cascade predicts 1.3 / 0.15 = 8.67 tokens/s, but at its acceptance's 5th
    percentile only 0.8 of that (6.93); float16 decodes autoregressively at 1 / 0.13 = 7.69.
    The mean rule chooses the cascade; the assured rule chooses float16, separating the
    cascade below it by its assured throughput, and the account still names the cascade as
    faster, with both figures."""
    script = {("bfloat16", 2): _rounds(0.150, 0.01), ("float16", 2): _rounds(0.130, 0.01)}
    search = _StubSearch(script, speculative={("bfloat16", 2): (1.3, 0.8)}, choice=choice)
    chosen = search.run()
    t = _trials(search)
    spec, ar = t[("bfloat16", 2)], t[("float16", 2)]
    assert spec.score == pytest.approx(1.3 / 0.150, rel=0.02)
    assert spec.assured == pytest.approx(0.8 * spec.score) and ar.assured == ar.score
    if choice == "mean":
        assert (chosen.dtype, chosen.threads) == ("bfloat16", 2)
        assert ar.excluded_by == "separated" and spec.rank == spec.score
        return
    assert (chosen.dtype, chosen.threads) == ("float16", 2)
    assert spec.excluded_by == "separated" and spec.rank == spec.assured
    assert spec.rank_se == pytest.approx(spec.score_se * 0.8)
    lines = summary(chosen.trial, list(t.values()), 60.0)
    assert "(autoregressive decoding, EWIF 1.000) (chosen by the assured rule)" in lines[0]
    (faster,) = [line for line in lines if line.startswith("faster, not chosen: ")]
    assert f"predicted {spec.score:.2f} ± {spec.score_se:.2f} tokens/s, assured 6.9" in faster
    assert faster.endswith("excluded by " + EXCLUSIONS["separated"])
    record = spec.to_dict()
    assert record["assured_tokens_per_s"] == spec.assured and record["choice_rule"] == "assured"
    assert record["throughput_interval_tokens_per_s"] == list(spec.interval)


def test_a_race_gives_its_rounds_to_the_noisier_of_the_two():
    """A leader whose short curve is noisy (±10 % per round) and a steady runner-up 4 %
    slower: the difference's error is the leader's, so the race's rounds go to the leader —
    rounds it takes anyway if chosen — and the runner-up is separated below with fewer
    rounds than the cap."""
    script = {("float16", 2): _rounds(0.100, 0.10), ("bfloat16", 2): _rounds(0.104, 0.002)}
    search = _StubSearch(script)
    lead, runner = search.candidates
    search.run_candidate(lead)
    search.run_candidate(runner)
    assert lead.rounds > MIN_ROUNDS and lead.trial.stage == "short curve"
    assert runner.trial.excluded_by == "separated" and runner.rounds < 10
    assert search.choose() is lead and lead.rounds == 10


@given(
    score=st.floats(10.0, 100.0),
    low=st.floats(0.01, 200.0),
    width=st.floats(0.0, 50.0),
    se=st.floats(0.0, 5.0),
    choice=st.sampled_from(["assured", "mean"]),
)
def test_the_assured_throughput_never_exceeds_the_score(score, low, width, se, choice):
    """``1 / t_AR <= A <= S`` for every interval (a skewed bootstrap's low end may lie above
    the estimate; below its own AR a candidate decodes autoregressively), so a bound of the
    score bounds the rank under either rule; the rank's timing error scales with it. Scores
    are at least the AR's ``1 / 0.1`` (``S = max(EWIF*, 1) / t_AR``)."""
    trial = NumericsTrial("float16", 2, 0.1, "rounds", score, _SPECULATIVE, score_se=se)
    trial = replace(trial, interval=(low, low + width), choice=choice)
    assert trial.assured == max(min(low, score), 10.0) <= trial.score
    assert trial.rank == (trial.assured if choice == "assured" else score)
    assert trial.rank_se == pytest.approx(se * trial.rank / score)
    assert replace(trial, interval=None).assured == score


@pytest.mark.parametrize("choice", ["assured", "mean"])
def test_the_assured_bound_stops_a_candidate_only_the_mean_could_choose(choice):
    """float16 × 2 decodes autoregressively at 10 tokens/s; float16 × 1's score bound (12) is
    above it, but its bound of the assured throughput (8) is not: under the assured rule it is
    excluded untimed ("assured bound") and the account names it as maybe faster; the mean
    rule, which ranks by the score, times it."""
    script = {("float16", 2): _rounds(0.100, 0.01), ("float16", 1): _rounds(0.2, 0.01)}
    search = _StubSearch(script, choice=choice)
    search.settings = replace(search.settings, counts=(2, 1))
    search.candidates[1].bound = 12.0
    search.assured_bounds[("float16", 1)] = 8.0
    search.quick[("float16", 1)] = {"t": [0.2, 0.3, 0.4, 0.5]}
    chosen = search.run()
    t = _trials(search)[("float16", 1)]
    assert (chosen.dtype, chosen.threads) == ("float16", 2)
    if choice == "mean":
        assert t.excluded_by != "assured bound" and search.timed_rounds[("float16", 1)] > 0
        return
    assert t.excluded_by == "assured bound" and t.stage == "bound"
    assert ("float16", 1) not in search.timed_rounds
    record = t.to_dict()
    assert record["quick_look_assured_bound_tokens_per_s"] == 8.0
    assert record["reason"] == EXCLUSIONS["assured bound"]
    lines = summary(chosen.trial, list(_trials(search).values()), 60.0)
    assert "1 by assured bound" in lines[1]
    (maybe,) = [line for line in lines if line.startswith("maybe faster, not timed: ")]
    assert "float16 × 1 thread, its score at most 12.00" in maybe and "at most 8.00" in maybe


def test_a_bound_waits_until_every_other_candidate_has_run():
    """bfloat16 × 2 leads first; float32 × 2's bound (3) is below its rank, but the leader is
    not confirmed then: float16 × 2 overtakes it, and only the final leader is confirmed
    before the bound excludes float32 × 2 — the overtaken leader keeps its few rounds."""
    script = {
        ("bfloat16", 2): _rounds(0.150, 0.01),
        ("float32", 2): _rounds(0.400, 0.01),
        ("float16", 2): _rounds(0.100, 0.01),
    }
    search = _StubSearch(script)
    search.settings = replace(search.settings, counts=(2, 1))
    search.candidates[1].bound = 3.0
    search.quick[("float32", 2)] = {"t": [0.4, 0.5, 0.6, 0.7]}
    chosen = search.run()
    t = _trials(search)
    assert (chosen.dtype, chosen.threads) == ("float16", 2)
    assert t[("float32", 2)].excluded_by == "quick-look bound"
    assert ("float32", 2) not in search.timed_rounds
    assert t[("bfloat16", 2)].stage != "confirmed" and t[("bfloat16", 2)].rounds < 10
