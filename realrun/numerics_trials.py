"""The numerics search's records: every candidate's trial, and the account of the choice
that names every faster candidate and why it was excluded.

A candidate ``(dtype, threads)`` is scored by its predicted throughput
``max(EWIF*, 1) / t_AR`` tokens/s (:mod:`realrun.numerics`). Every candidate that is not
chosen was excluded by one rule (:data:`EXCLUSIONS`), recorded in its trial
(``excluded_by``) and in the results file's ``metadata.numerics_trials``.

The quick-look bounds (``bound``, ``assured_bound`` of a trial) are
:mod:`realrun.numerics_bound`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ewif.files.model_set import ModelSet
from ewif.search.recommendation import Recommendation
from realrun.family import Family
from realrun.invariance import Invariance
from realrun.measure import Costs
from realrun.methods import recommendation_record
from realrun.numerics_choice import DEFAULT_CHOICE
from realrun.numerics_rounds import SEPARATION_Z, STOPS, separation

#: How far each candidate's search went: its quick-look bound, its short curve, its batch
#: invariance check, more rounds under the separation rule, or confirmed (measured until
#: the precision rule or the repeats cap stopped it; :mod:`realrun.numerics_rounds`).
STAGES = ("bound", "short curve", "invariance", "rounds", "confirmed")
#: The rules that exclude a candidate, by name (``NumericsTrial.excluded_by``).
EXCLUSIONS = {
    "quick-look bound": "its quick-look bound is below the best eligible rank",
    "assured bound": (
        "its quick-look bound of the assured throughput (the 5th percentile over the measuring "
        "prompts' acceptance resampled, at the floor costs) is below the best eligible rank"
    ),
    "separated": (
        f"its rank (the choice rule's throughput) is below the best eligible one by more than "
        f"{SEPARATION_Z} standard errors of the difference (one-sided, 95 %)"
    ),
    "batch invariance": "its target's multi-position pass changes greedy choices (the rule)",
    "lower score": (
        "not separated from the choice (measured to the repeats cap, or until the cap could not "
        "separate them), it ranked below it (by the choice rule's throughput)"
    ),
    "separated earlier": (
        "its rank was separated below the leader's when its rounds stopped; against the "
        "choice's final rounds the two are within their errors"
    ),
    "tie": (
        "the cap could not separate it from the leader of the time, which ranked above it; "
        "against the choice's final rounds it ranks above the choice, within their errors: a "
        "tie, kept by the leader measured in full"
    ),
    "none eligible": "no candidate passed batch invariance; the highest agreement was taken",
}


@dataclass
class Candidate:
    """A candidate while the search runs (:mod:`realrun.numerics`): its quick-look bounds
    (:mod:`realrun.numerics_bound`), costs and trial (None until a stage ends) so far."""

    dtype: str
    threads: int
    bound: float | None = None
    assured_bound: float | None = None
    costs: Costs | None = None
    trial: NumericsTrial | None = None
    offset: int = 0  # rounds run so far, warm-up included: where the next round starts
    spent: float = 0.0  # wall seconds of its timed rounds
    seconds: float = 0.0  # wall seconds of all its rounds (warm-up too) and its checks

    @property
    def rounds(self) -> int:
        """Timed rounds so far."""
        return 0 if self.costs is None else self.costs.repeats


@dataclass
class Measured:
    """What the measuring split produced (:func:`realrun.numerics.measure_numerics`): the
    family in the chosen numerics, its model set, the trials, the chosen thread count and the
    account (no trials nor account when given)."""

    family: Family
    model_set: ModelSet
    trials: list[NumericsTrial]
    threads: int
    summary: tuple[str, ...] = ()


@dataclass(frozen=True)
class NumericsTrial:
    """One numerics candidate and how far the search took it: ``stage`` is where it stopped
    (:data:`STAGES`); ``score`` is the bound ``U`` at stage ``"bound"``, else the predicted
    tokens/s of ``recommendation`` (from a short curve at stages ``"short curve"`` and
    ``"invariance"``); ``ar_token_s`` the seconds of one autoregressive token (at stage
    ``"bound"`` the target's one-token pass, a lower bound of it); ``invariance`` is None
    where it was not checked; ``excluded_by`` names the rule that excluded it
    (:data:`EXCLUSIONS`; None for the choice); ``bound`` is its quick-look bound (None when
    the search had no quick look) and ``assured_bound`` its quick-look bound of the assured
    throughput (None where it was not needed, :mod:`realrun.numerics_bound`); ``rounds``
    its timed rounds, ``stopped`` why they stopped (:data:`realrun.numerics_rounds.STOPS`)
    and ``score_se`` the score's standard error
    (:func:`realrun.numerics_rounds.score_stderr`); ``seconds`` the wall time of its rounds
    (warm-up included) and its batch invariance check; ``interval`` the 90 %
    interval of a speculative recommendation's throughput
    (:func:`realrun.numerics_choice.throughput_interval`) and ``choice`` the rule that ranks
    the candidates (:data:`realrun.numerics_choice.CHOICE_RULES`)."""

    dtype: str
    threads: int
    ar_token_s: float
    stage: str
    score: float
    recommendation: Recommendation | None = None
    invariance: Invariance | None = None
    min_agreement: float = 0.99
    rule: str = "strict"
    excluded_by: str | None = None
    bound: float | None = None
    assured_bound: float | None = None
    rounds: int = 0
    stopped: str | None = None
    score_se: float = 0.0
    seconds: float = 0.0
    interval: tuple[float, float] | None = None
    choice: str = DEFAULT_CHOICE

    @property
    def assured(self) -> float:
        """The assured throughput: the interval's low end, never above the score (a skewed
        bootstrap can put its 5th percentile above the estimate) nor below the candidate's own
        AR (``1 / ar_token_s``: it can always decode autoregressively, EWIF 1 exactly, as the
        assured decision then does, :mod:`ewif.predict.assurance`), else the score
        (autoregressive; at stage ``"bound"`` an upper bound of it)."""
        if self.interval is None:
            return self.score
        return max(min(self.interval[0], self.score), 1.0 / self.ar_token_s)

    @property
    def rank(self) -> float:
        """What the choice rule compares: the assured throughput or the score."""
        return self.assured if self.choice == "assured" else self.score

    @property
    def rank_se(self) -> float:
        """The rank's timing error, ``se(S)·rank/S`` (:mod:`realrun.numerics_choice`)."""
        return self.score_se * self.rank / self.score if self.score > 0 else 0.0

    @property
    def eligible(self) -> bool | None:
        """Batch-invariant under ``rule`` (None: not checked)."""
        if self.invariance is None:
            return None
        return self.invariance.eligible(self.rule, self.min_agreement, self.dtype)

    @property
    def label(self) -> str:
        return f"{self.dtype} × {self.threads} thread{'s' * (self.threads != 1)}"

    def to_dict(self) -> dict:
        out: dict = {
            "dtype": self.dtype,
            "threads": self.threads,
            "ar_seconds_per_token": self.ar_token_s,
            "stage": self.stage,
            ("upper_bound_tokens_per_s" if self.stage == "bound" else "predicted_tokens_per_s"): (
                self.score
            ),
            "excluded_by": self.excluded_by,
            "rounds": self.rounds,
            "stopped": self.stopped,
            "seconds": self.seconds,
        }
        if self.stopped is not None:
            out["stopped_because"] = STOPS[self.stopped]
        if self.stage != "bound":
            out["score_stderr_tokens_per_s"] = self.score_se
            out["assured_tokens_per_s"] = self.assured
            out["choice_rule"] = self.choice
        if self.interval is not None:
            out["throughput_interval_tokens_per_s"] = list(self.interval)
        if self.excluded_by is not None:
            out["reason"] = EXCLUSIONS[self.excluded_by]
        if self.bound is not None:
            out["quick_look_bound_tokens_per_s"] = self.bound
        if self.assured_bound is not None:
            out["quick_look_assured_bound_tokens_per_s"] = self.assured_bound
        if self.recommendation is not None:
            out["recommendation"] = recommendation_record(self.recommendation)
        if self.invariance is not None:
            out["batch_invariance"] = self.invariance.to_dict()
            out["batch_invariance_rule"] = self.rule
            out["eligible"] = self.eligible
        return out


def reread_separation(trial: NumericsTrial, chosen: NumericsTrial) -> NumericsTrial:
    """A trial excluded against the leader of the time, re-read against the chosen
    candidate's final score: ``separated`` and still separated below, unchanged, else
    ``separated earlier`` (the choice's later rounds moved the gap within the errors);
    ``lower score`` and now ranked above the choice, ``tie`` (its rounds stopped as futile
    against a leader whose later rounds brought it below)."""
    if trial.excluded_by == "lower score" and trial.rank > chosen.rank:
        return replace(trial, excluded_by="tie")
    if trial.excluded_by != "separated":
        return trial
    side = separation(
        trial.rank, trial.rank_se, trial.rounds, chosen.rank, chosen.rank_se, chosen.rounds
    )
    return trial if side == "below" else replace(trial, excluded_by="separated earlier")


def score(rec: Recommendation, ar_token_s: float) -> float:
    """Predicted tokens/s of a candidate: ``max(EWIF*, 1) / t_AR``."""
    return max(rec.ewif, 1.0) / ar_token_s


def summary(
    chosen: NumericsTrial,
    trials: Sequence[NumericsTrial],
    seconds: float,
    own: float | None = None,
) -> list[str]:
    """What was chosen (score ± its standard error, assured throughput and choice rule,
    recommendation — autoregressive decoding where the assured rule finds a speculative one's
    lead not assured, as the run then decides, :mod:`ewif.predict.assurance` — batch
    invariance, its rounds and why they stopped) and why (how many candidates each rule
    excluded), then one line for every candidate predicted faster than
    the choice, naming the rule that excluded it (and its assured throughput), and one for
    every candidate the assured bound excluded whose score bound is above the choice's; with the
    choice's throughput interval (a speculative choice), a line with it naming every measured
    candidate whose score falls inside (a lead the drafts' acceptance may not hold); with
    ``own`` — the seconds the chosen numerics alone took (one load, α, its
    rounds and its check: what a run given those numerics pays) — a last line with what the
    search added to that."""
    rec, inv = chosen.recommendation, chosen.invariance
    assert rec is not None and inv is not None
    what = rec.best.describe() if rec.decision == "speculative" else "autoregressive decoding"
    ewif_low = None if chosen.interval is None else chosen.interval[0] * chosen.ar_token_s
    if chosen.choice == "assured" and ewif_low is not None and ewif_low <= 1.0:  # the decision
        what = f"autoregressive decoding: {what} is not assured (EWIF low {ewif_low:.3f} <= 1)"
    lines = [
        f"numerics: {chosen.label}, predicted {chosen.score:.2f} ± {chosen.score_se:.2f} "
        f"tokens/s ({what}, EWIF {max(rec.ewif, 1.0):.3f}){_assured(chosen)} (chosen by the "
        f"{chosen.choice} rule); batch invariance "
        f"{inv.describe(chosen.dtype)} ({chosen.rule})"
        + ("" if chosen.eligible else " (none eligible: highest agreement taken)")
        + f"; {_rounds(chosen)}"
    ]
    counts = {
        rule: sum(t.excluded_by == rule for t in trials)
        for rule in EXCLUSIONS
        if rule != "none eligible"
    }
    lines.append(
        f"why: {len(trials)} candidates in {seconds:.0f} s; excluded: "
        + ", ".join(f"{n} by {rule}" for rule, n in counts.items())
    )
    for t in sorted(trials, key=lambda t: -t.score):
        if t is chosen or t.stage == "bound" or t.score <= chosen.score:
            continue
        why = EXCLUSIONS[t.excluded_by or "lower score"]
        if t.excluded_by == "batch invariance" and t.invariance is not None:
            why = f"batch invariance {t.invariance.describe(t.dtype)} under the {t.rule} rule"
        lines.append(
            f"faster, not chosen: {t.label} at a predicted {t.score:.2f} ± {t.score_se:.2f} "
            f"tokens/s{_assured(t)} ({t.stage}, {_rounds(t)}): excluded by {why}"
        )
    for t in trials:
        if t.excluded_by == "assured bound" and t.score > chosen.score:
            lines.append(
                f"maybe faster, not timed: {t.label}, its score at most {t.score:.2f} tokens/s, "
                f"its assured throughput at most {t.assured_bound:.2f}: excluded by "
                f"{EXCLUSIONS['assured bound']} (the mean rule would have timed it)"
            )
    if chosen.interval is not None:
        low, high = chosen.interval
        inside = [
            f"{t.label} at {t.score:.2f}"
            for t in trials
            if t is not chosen and t.stage != "bound" and low <= t.score <= high
        ]
        lines.append(
            f"uncertain: the choice's throughput, 90 % interval [{low:.2f}, {high:.2f}] tokens/s "
            "(its drafts' acceptance on the measuring prompts, resampled)"
            + (f"; inside it: {', '.join(inside)} — the lead may not hold" if inside else "")
        )
    if own is not None:
        lines.append(
            f"cost: the chosen numerics alone took {own:.0f} s of the {seconds:.0f} s (one "
            f"load, α, its {chosen.rounds} rounds and its check: what a run given them pays); "
            f"the search added {seconds - own:.0f} s"
        )
    return lines


def _assured(t: NumericsTrial) -> str:
    """``", assured A"`` of a trial with a throughput interval (a speculative one), else ``""``."""
    return "" if t.interval is None else f", assured {t.assured:.2f}"


def _rounds(t: NumericsTrial) -> str:
    """``"N rounds, stopped: why"`` of a trial."""
    why = "" if t.stopped is None else f", stopped: {t.stopped}"
    return f"{t.rounds} round{'s' * (t.rounds != 1)}{why}"
