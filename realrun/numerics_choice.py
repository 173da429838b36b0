"""Which numerics candidate the search chooses: the choice rules and the assured throughput.

A candidate ``(dtype, threads)`` has a predicted throughput, its *score*
``S = max(EWIF*, 1) / t_AR`` tokens/s (:mod:`realrun.numerics`). A speculative score rests on
the drafts' acceptance, measured on a few prompts, and on the cost curves' timing; more timing
rounds shrink the second error (the separation rule of :mod:`realrun.numerics_rounds` is
about those rounds) but never the first. And the recommendation is the best of many
configurations scored on that one sample, so its EWIF* is biased upward (the winner's curse):
in two searches on this project's AMD machine a bfloat16 cascade was chosen over float16's
autoregressive decoding by the acceptance it predicted, and ran slower than float16 AR was
predicted (6.14 and 6.58 tokens/s measured, against 7.90 and 7.14).

The **assured throughput** of a candidate is the one-sided 95 % lower bound of its
recommendation's throughput,

    A = max(min(q_0.05(EWIF(config)), EWIF*), 1) / t_AR   (speculative),
    A = 1 / t_AR                                  (autoregressive),

``q_0.05`` the 5th percentile of the configuration's exact EWIF over the bootstrap of
:mod:`ewif.predict.bootstrap` — the measuring prompts resampled whole, the cost curves and
the unit drawn with their standard errors — the lower end of its 90 % interval
(:func:`throughput_interval`); never above the estimate ``EWIF*``, so ``A <= S`` always (a
skewed bootstrap can put its 5th percentile above it), and a bound of ``S`` bounds ``A``;
never below the candidate's own AR either: where ``q_0.05 < 1`` the run decides to decode
autoregressively (the same rule decides speculation, :mod:`ewif.predict.assurance`).
Autoregressive decoding has no acceptance to be wrong about: its EWIF is 1 exactly.

The rules (:data:`CHOICE_RULES`, ``choice``):

* ``assured`` (the default) ranks candidates by ``A``: a speculative lead must hold at its
  drafts' worst plausible acceptance. On the second search above it chooses float16's AR
  (an assured 6.42 against 7.12 tokens/s; the cascade measured 6.58).
* ``mean`` ranks them by ``S``, the expected throughput at the measured acceptance: the
  faster choice on average when the acceptance sample is large, and the rule of files made
  before the choice rules existed.

Every comparison of the search — the leader, the quick-look bound (an upper bound of ``S``,
hence of ``A``), the separation test, the final choice — uses the rule's *rank*
(:attr:`realrun.numerics_trials.NumericsTrial.rank`); the separation test's standard error
is the timing error of the rank, ``se(S)·A/S`` (the part rounds reduce). The account of the
choice names every candidate whose ``S`` is above the choice's, with its ``A``.
"""

from __future__ import annotations

from ewif.files.model_set import ModelSet
from ewif.predict.bootstrap import prediction_intervals
from ewif.search.recommendation import Recommendation

#: The choice rules by name (module docstring); the first is the default.
CHOICE_RULES = {
    "assured": "the highest assured throughput: the 5th percentile of its recommendation's "
    "throughput over the measuring prompts' acceptance and the timing's errors resampled",
    "mean": "the highest predicted throughput at the measured acceptance",
}
#: The default rule.
DEFAULT_CHOICE = next(iter(CHOICE_RULES))


def check_choice(choice: str) -> str:
    """``choice`` when it names a rule, else a ``ValueError`` naming the rules."""
    if choice not in CHOICE_RULES:
        raise ValueError(f"choice must be one of {', '.join(CHOICE_RULES)}, got {choice!r}")
    return choice


def throughput_interval(
    rec: Recommendation, model_set: ModelSet, ar_token_s: float
) -> tuple[float, float] | None:
    """The 90 % bootstrap interval of a speculative recommendation's throughput, tokens/s:
    its configuration's EWIF interval (:func:`ewif.predict.bootstrap.prediction_intervals`,
    the expected speed-up's) over the AR token's seconds; None when it decodes
    autoregressively or ``model_set`` holds no per-prompt evidence."""
    if rec.decision != "speculative" or model_set.bootstrap is None:
        return None
    (found,) = prediction_intervals(model_set, [rec.best])
    return found.low / ar_token_s, found.high / ar_token_s
