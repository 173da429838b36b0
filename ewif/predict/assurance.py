"""Whether speculation is assured to pay: the decision rules between a configuration and AR.

A recommendation's configuration has an exact EWIF* at the measured acceptance. Measured on a
few prompts, that acceptance is uncertain, and the recommendation is the best of many
configurations scored on that one sample, so EWIF* leans high (the winner's curse).
Autoregressive decoding has nothing to be wrong about: its EWIF is 1 exactly. The decision
between the two follows a rule (:data:`DECISION_RULES`):

* ``assured`` (the default): speculate when the configuration's one-sided 95 % lower bound
  beats AR — the low end of its 90 % bootstrap interval
  (:func:`ewif.predict.bootstrap.prediction_interval`: the measuring prompts resampled whole,
  the cost curves and the unit drawn with their errors) is above 1; otherwise decode
  autoregressively, and say which configuration was not assured and its interval.
* ``mean``: speculate when EWIF* > 1.

Evidence (``docs/findings.md``, *The decision rule*): over the 23 real runs this project ships
(three CPU kinds, two engines, held-out prompts), the mean rule recommended speculation in 5
runs whose recommended configuration then ran slower than AR (0.83–0.96×); the assured rule
decides AR in all 5, keeps the 6 speculative decisions that paid, and misses one (a 1.52×
cascade whose interval, on 4 measuring prompts, reached 0.94).

A model set without per-prompt evidence (a preset, a set with no ``bootstrap`` section) has
no interval: both rules then decide as the mean does, and the decision says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ewif.files.model_set import ModelSet
from ewif.predict.bootstrap import PredictionInterval, prediction_interval

#: The decision rules by name (module docstring); the first is the default.
DECISION_RULES = {
    "assured": "speculate only when the configuration's 90 % interval lies above AR's EWIF 1",
    "mean": "speculate when the configuration's EWIF at the measured acceptance exceeds 1",
}
#: The default rule.
DEFAULT_RULE = next(iter(DECISION_RULES))


def check_rule(rule: str) -> str:
    """``rule`` when it names a decision rule, else a ``ValueError`` naming the rules."""
    if rule not in DECISION_RULES:
        names = ", ".join(DECISION_RULES)
        raise ValueError(f"the decision rule must be one of {names}, got {rule!r}")
    return rule


@dataclass(frozen=True)
class Decision:
    """``decision`` (``"speculative"`` or ``"autoregressive"``) of a configuration with exact
    EWIF ``ewif`` under ``rule``; ``interval`` its bootstrap interval (None where the rule did
    not need one or the model set has no per-prompt evidence)."""

    decision: str
    rule: str
    ewif: float
    interval: PredictionInterval | None = None

    @property
    def unassured(self) -> bool:
        """True when the mean would speculate and the interval's low end does not beat AR."""
        return self.ewif > 1.0 and self.decision == "autoregressive"

    def reason(self) -> str:
        """Why, in a few words: the interval against AR, or the rule's plain test."""
        if self.interval is None:
            test = "exceeds" if self.ewif > 1.0 else "does not exceed"
            return f"EWIF {self.ewif:.3f} {test} AR's 1 (no interval: the mean's test)"
        iv = self.interval
        where = "above" if iv.low > 1.0 else "reaching below"
        return f"{iv.level:.0%} interval [{iv.low:.3f}, {iv.high:.3f}] {where} AR's 1"


def decide(
    model_set: ModelSet,
    models: Sequence[str],
    K: object,
    lenience: float,
    ewif: float,
    rule: str = DEFAULT_RULE,
    interval: PredictionInterval | None = None,
) -> Decision:
    """The decision for the configuration ``(models, K, lenience)`` of exact EWIF ``ewif``
    under ``rule`` (module docstring). The interval is computed only where it can change
    the answer (``assured``, ``ewif > 1``, per-prompt evidence present), unless the caller
    has it already (``interval``: this configuration's, from
    :func:`ewif.predict.bootstrap.prediction_interval`)."""
    check_rule(rule)
    if ewif <= 1.0 or rule == "mean" or model_set.bootstrap is None:
        return Decision("speculative" if ewif > 1.0 else "autoregressive", rule, ewif)
    if interval is None:
        interval = prediction_interval(model_set, models, K, lenience)
    return Decision("speculative" if interval.low > 1.0 else "autoregressive", rule, ewif, interval)
