"""When a numerics candidate's timing rounds stop: the sequential rules of the search.

Every candidate ``(dtype, threads)`` is scored by ``S = max(EWIF*, 1) / t_AR`` tokens/s
(:mod:`realrun.numerics`), where ``t_AR`` — the **AR unit** — is the timed autoregressive
seconds per token over the candidate's rounds (``Σ seconds / Σ tokens``, with its standard
error over rounds, :func:`realrun.timing.per_token`). The search adds timing rounds one at
a time and stops by two rules instead of fixed round counts.

The score's standard error. By the delta method on ``1 / t_AR`` with EWIF* held at its
estimate, ``se(S) = S · se(t_AR) / t_AR``: the score is as precise, relatively, as the AR
unit (:func:`score_stderr`). It is exact when the recommendation is autoregressive
(``S = 1 / t_AR``); for a speculative one the cycle's pass seconds, timed in the same rounds
on the same machine, stand for it. α's error is left out here: more rounds never shrink it,
and these rules only decide how many rounds to time. The choice weighs it (the ``assured``
rule of :mod:`realrun.numerics_choice`), and every comparison here is of the rule's *rank*
with its timing error ``se(S)·rank/S``.

Separation (a runner-up's rounds, :func:`separation`). A candidate is *separated* from the
leader (the best eligible rank so far) when, after at least :data:`MIN_ROUNDS` rounds
each, the difference of their ranks exceeds :data:`SEPARATION_Z` standard errors of the
difference, ``|R − R_lead| > z · √(se(R)² + se(R_lead)²)``: below, it is excluded
(``"separated"``); above, it becomes the leader. While neither holds, one more round goes
to whichever of the two has the larger standard error — the leader's rounds, up to
``repeats``, are never wasted: the chosen candidate takes ``repeats`` rounds in all — until
the runner-up has ``repeats`` rounds.

Futility (:func:`futile`). A runner-up's rounds also stop when the cap could not separate it:
with each rank's timing error projected to ``repeats`` rounds as ``se·√(rounds/repeats)``
(``SE_N`` of the difference at the cap), the difference ``d`` at the cap, if the current one
``d_n`` were the truth, is normal about ``d_n`` with the variance of the rounds to come,
``Σ se_N,i²·(1 − rounds_i/repeats)``; its chance to exceed ``z·SE_N`` (the conditional power)
below :data:`FUTILITY_POWER` stops the rounds of a runner-up *behind* the leader, which is
excluded as at the cap (``lower score``); one ahead is measured on, so that early noise never
displaces the leader. A runner-up within its timing error of the leader then costs its short
curve and a few rounds, not the cap's: in a shipped search a bfloat16 cascade 0.1 tokens/s
behind float16 AR (± 0.3) took 10 rounds, 160 s, to be excluded so.

Precision (the leader's rounds, :func:`confirmation_stop`). When a quick-look bound is
checked against the leader, its rounds stop once its AR unit's relative standard error is at
most :data:`PRECISION` after at least :data:`MIN_ROUNDS` rounds, or at ``repeats`` rounds;
never while its timed rounds have taken less than ``min_seconds`` (then up to
``4 · repeats`` rounds, as :func:`realrun.timing.time_family` extends rounds by time). The
chosen candidate then gets ``repeats`` rounds in all, as given numerics do: the precision
rule judges a score, but the chosen curves are the model set a run predicts with, and a
pass's mean over 3 rounds scatters by ~9 % on a shared VM (15 % per round).
"""

from __future__ import annotations

from statistics import NormalDist

#: One-sided z of a 95 % confidence level: a runner-up is separated from the leader when
#: their ranks differ by more than this many standard errors of the difference (a runner-up
#: that is really as fast as the leader is excluded at one look with probability ≤ 5 %).
SEPARATION_Z = 1.645
#: Relative standard error of the AR unit at which the leader's rounds stop (1.5 %: its
#: score is then known to ±3 % at 95 %).
PRECISION = 0.015
#: Rounds a candidate has at least before a standard error over its rounds is used.
MIN_ROUNDS = 3
#: Conditional power below which more rounds to the cap are judged futile (:func:`futile`).
FUTILITY_POWER = 0.1
#: Why a candidate's timing rounds stopped (``NumericsTrial.stopped``).
STOPS = {
    "bound": "not timed: a quick-look bound of its rank was below the best eligible rank",
    "separated": f"its rank was {SEPARATION_Z} standard errors below the leader's",
    "batch invariance": "its target failed batch invariance after its short curve",
    "futile": f"the repeats cap could not separate it from the leader (power < {FUTILITY_POWER})",
    "precision": f"its AR unit's relative standard error reached {PRECISION:.1%}",
    "repeats": "it reached the repeats cap",
}


def score_stderr(score: float, unit: float, unit_se: float) -> float:
    """``se(S) = S · se(t_AR) / t_AR`` (module docstring), tokens/s."""
    if unit <= 0:
        raise ValueError(f"the AR unit must be > 0 seconds, got {unit!r}")
    return score * unit_se / unit


def separation(
    score: float, se: float, rounds: int, lead: float, lead_se: float, lead_rounds: int
) -> str | None:
    """``"below"`` or ``"above"`` when a candidate's rank (``score``, the choice rule's
    throughput) is separated from the leader's (module docstring: both with at least
    :data:`MIN_ROUNDS` rounds, the difference beyond :data:`SEPARATION_Z` standard errors of
    it), else None."""
    if min(rounds, lead_rounds) < MIN_ROUNDS:
        return None
    bar = SEPARATION_Z * (se * se + lead_se * lead_se) ** 0.5
    if score < lead - bar:
        return "below"
    if score > lead + bar:
        return "above"
    return None


def futile(gap: float, errors: tuple[tuple[float, int], tuple[float, int]], repeats: int) -> bool:
    """True when ``repeats`` rounds each could not separate two ranks ``gap`` tokens/s apart
    with more than :data:`FUTILITY_POWER` conditional power (module docstring); ``errors``
    holds each rank's ``(timing error, rounds)``. False before :data:`MIN_ROUNDS` rounds each."""
    if min(n for _, n in errors) < MIN_ROUNDS:
        return False
    at_cap = [(e * e * n / max(n, repeats), n / max(n, repeats)) for e, n in errors]
    bar = SEPARATION_Z * sum(v for v, _ in at_cap) ** 0.5
    spread = sum(v * (1.0 - share) for v, share in at_cap) ** 0.5
    if spread == 0.0:
        return abs(gap) <= bar
    return NormalDist().cdf((abs(gap) - bar) / spread) < FUTILITY_POWER


def race_verdict(
    score: float,
    se: float,
    rounds: int,
    lead: float,
    lead_se: float,
    lead_rounds: int,
    repeats: int,
) -> str | None:
    """:func:`separation`'s side, else ``"futile"`` for a candidate behind the leader where
    :func:`futile`, else None (one more round)."""
    side = separation(score, se, rounds, lead, lead_se, lead_rounds)
    errors = ((se, rounds), (lead_se, lead_rounds))
    if side is None and score < lead and futile(lead - score, errors, repeats):
        return "futile"
    return side


def confirmation_stop(
    rounds: int, relative_se: float, spent: float, repeats: int, min_seconds: float = 0.0
) -> str | None:
    """Why the leader's rounds stop now (``"precision"`` or ``"repeats"``, :data:`STOPS`),
    or None for one more round (module docstring): ``rounds`` timed so far, the AR unit's
    ``relative_se``, ``spent`` seconds of timed rounds."""
    if spent < min_seconds and rounds < 4 * repeats:
        return None
    if rounds >= MIN_ROUNDS and relative_se <= PRECISION:
        return "precision"
    if rounds >= repeats:
        return "repeats"
    return None
