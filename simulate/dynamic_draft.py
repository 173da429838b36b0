"""Plain drafting with a draft length that changes from step to step, replayed over measured
acceptance traces: transformers' assisted-generation schedules against a fixed k.

transformers (5.x; ``transformers/generation/candidate_generator.py``,
``AssistedCandidateGenerator``) adapts the assistant's draft in two ways, read from its source:

* ``num_assistant_tokens_schedule`` — ``"heuristic"`` and ``"heuristic_transient"``: after a
  step whose drafted tokens were all accepted ``num_assistant_tokens += 2``, else
  ``num_assistant_tokens = max(1, num_assistant_tokens − 1)`` (``update_candidate_strategy``);
  ``"heuristic"`` keeps the value from one ``generate`` call to the next,
  ``"heuristic_transient"`` starts each call afresh, ``"constant"`` never changes it;
* ``assistant_confidence_threshold`` — the assistant stops drafting after a token whose
  probability under the assistant is below the threshold, that token kept
  (``ConfidenceCriteria``, ``transformers/generation/stopping_criteria.py``); it is re-fitted
  from an ROC curve of past drafts only when scikit-learn is installed.

The 5.x defaults (``_get_default_generation_params`` in
``transformers/generation/configuration_utils.py``): 20 draft tokens at most, the
``"constant"`` schedule, threshold 0.4 — the draft length adapts by the threshold alone. The
+2/−1 schedule from 5 tokens is what earlier releases used by default. A draft is also capped
at ``remaining − 1`` tokens (``_calculate_new_tokens``): a step never makes more than the
generation still needs.

**Replay.** A measuring prompt's trace ``a_t`` (:mod:`simulate.trace_replay`) says whether
the drafter's proposal at text position ``t`` passes the target; ``q_t`` (needed by a
threshold) is the drafter's probability of that proposal (:mod:`realrun.confidence`). A step
at position ``t`` drafts ``d`` tokens — the schedule's length, capped as above, cut after the
first ``q < threshold`` — the target accepts the leading ``n`` whose ``a`` holds (a
probability is drawn, as trace_replay does) and the step yields ``min(n + 1, remaining)``
tokens. Passes, priced by the model set's curves as every prediction is: the target's over
``d + 1`` positions; ``d`` drafter passes of one position each, except that after a step that
accepted all ``d`` a drafter with catch-up feeds two in its first pass (its own last draft and
the bonus token; one returns no logit row) — transformers' assistant too, whose cache is
cropped to the accepted prefix (``_update_past_and_masks``); a proposer's proposals at its
per-token cost. A fixed ``k`` (:meth:`Schedule.fixed`) is the same replay without the cap,
as Algorithm 1 decodes: it is :func:`simulate.trace_replay.replay` of SD ``K = [[k]]``
(tested equal). The result is a :class:`simulate.trace_replay.Replay`, priced and resampled
as every replay is.

**Why only the text can make a schedule pay (Proposition DK).** Under the Bernoulli model
(every test independent with probability α) and step costs that do not depend on earlier
steps (no catch-up), no draft length chosen from the history beats the best fixed ``k``:
with ``λ* = max_k E[T(k)]/E[C(k)]``, every step has
``E[T − λ*·C | history] <= max_k (E[T(k)] − λ*·E[C(k)]) = 0``, so ``Σ T − λ*·Σ C`` is a
supermartingale and the long-run ratio ``Σ T / Σ C`` is at most ``λ*`` (renewal–reward, as
Dinkelbach's step). A schedule can win only where acceptance is not i.i.d. — clustered along
the text, which the replay over measured traces keeps — through the catch-up pass, whose
first pass after a full acceptance makes the cost depend on the previous step, or by reading
information about the coming tests (the drafter's confidence, which a threshold reads).

One approximation, trace_replay's: a draft token after the first rejected one is read on the
text, not on the drafter's own (deviating) continuation — its acceptance changes nothing (the
target stops at the first rejection), its confidence only how long that draft runs.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ewif.base import validate
from ewif.files.model_set import ModelSet
from simulate.trace_replay import Replay

SCHEDULES = ("constant", "heuristic", "heuristic_transient")

__all__ = ["SCHEDULES", "Schedule", "replay_schedule"]


@dataclass(frozen=True)
class Schedule:
    """A draft-length policy (module docstring): ``start`` tokens, a ``schedule`` of
    :data:`SCHEDULES`, a confidence ``threshold`` (None: none) and whether a draft is capped
    at the tokens the generation still needs less one (``cap_at_end``, transformers)."""

    start: int
    schedule: str = "constant"
    threshold: float | None = None
    cap_at_end: bool = True

    def __post_init__(self) -> None:
        validate.count("start", self.start, minimum=1)
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}"
            )
        if self.threshold is not None:
            validate.probability("threshold", self.threshold)

    @classmethod
    def fixed(cls, k: int) -> Schedule:
        """Algorithm 1's plain SD: ``k`` draft tokens every step, no cap."""
        return cls(k, "constant", None, cap_at_end=False)

    @classmethod
    def transformers_default(cls) -> Schedule:
        """transformers 5.x: at most 20 draft tokens, cut at confidence 0.4."""
        return cls(20, "constant", 0.4)

    @property
    def adapts(self) -> bool:
        return self.schedule != "constant"

    def describe(self) -> str:
        if not self.cap_at_end and not self.adapts and self.threshold is None:
            return f"fixed k={self.start}"
        parts = [f"{self.schedule} from {self.start}"]
        if self.threshold is not None:
            parts.append(f"confidence >= {self.threshold:g}")
        return ", ".join(parts)


def _accepts(trace: np.ndarray, position: int, mean: float, rng: random.Random) -> bool:
    """The trace's test at ``position`` (past the end: its mean), drawn when a probability."""
    p = float(trace[position]) if position < trace.size else mean
    return p >= 1.0 or (p > 0.0 and rng.random() < p)


def _draft_length(
    length: int, schedule: Schedule, t: int, remaining: int, confidence: np.ndarray | None
) -> int:
    """The step's draft: ``length``, capped, cut after the first low-confidence token."""
    d = min(length, remaining - 1) if schedule.cap_at_end else length
    if schedule.threshold is not None and confidence is not None:
        for i in range(d):
            if t + i < confidence.size and confidence[t + i] < schedule.threshold:
                return i + 1
    return d


def _replay_prompt(
    trace: np.ndarray,
    confidence: np.ndarray | None,
    schedule: Schedule,
    length: int,
    catch_up: bool,
    rng: random.Random,
) -> tuple[list[Counter], float, int]:
    """One prompt replayed: (passes by m of the target and the drafter, catch-up positions,
    the schedule's length at the end)."""
    passes = [Counter(), Counter()]
    caught, t, n_text, full = 0.0, 0, trace.size, False
    mean = float(trace.mean()) if trace.size else 0.0
    while t < n_text:
        remaining = n_text - t
        d = _draft_length(length, schedule, t, remaining, confidence)
        if d:
            first = 2 if (catch_up and full) else 1
            passes[1][first] += 1
            passes[1][1] += d - 1
            caught += first - 1
        n = 0
        while n < d and _accepts(trace, t + n, mean, rng):
            n += 1
        passes[0][d + 1] += 1
        t += min(n + 1, remaining)
        full = d > 0 and n == d
        if schedule.adapts:
            length = length + 2 if n == d else max(1, length - 1)
    return passes, caught, length


def replay_schedule(
    model_set: ModelSet,
    drafter: str,
    schedule: Schedule,
    *,
    confidences: Sequence[np.ndarray] | None = None,
    seed: int = 0,
) -> Replay:
    """Replay plain drafting by ``drafter`` under ``schedule`` over the model set's measuring
    traces of the target and ``drafter`` at lenience 1 (module docstring); ``confidences``:
    per measuring prompt, the drafter's probability of its proposal at each position
    (required with a threshold). ValueError without the traces."""
    models = (model_set.models[0], drafter)
    j = model_set.index(drafter)
    data = model_set.bootstrap
    if data is None or data.acceptance_traces is None or (1.0, 0, j) not in data.acceptance_traces:
        raise ValueError(
            f"the model set carries no acceptance traces of the target and {drafter!r} "
            "(measure it with this version of csd measure), so it cannot be replayed"
        )
    traces = data.acceptance_traces[(1.0, 0, j)]
    if schedule.threshold is not None:
        if confidences is None or [len(c) for c in confidences] != [t.size for t in traces]:
            raise ValueError(
                "a confidence threshold needs the drafter's confidence at every position of "
                "every measuring trace (realrun.confidence)"
            )
    cascade = model_set.to_cascade(models, [[1]])
    catch_up = bool(cascade.catch_up[1]) if cascade.catch_up is not None else False
    counts, caught, length = [], [], schedule.start
    for p, trace in enumerate(traces):
        if schedule.schedule != "heuristic":  # transient and constant start afresh
            length = schedule.start
        conf = None if confidences is None else np.asarray(confidences[p], dtype=float)
        by_m, fed, length = _replay_prompt(
            np.asarray(trace, dtype=float),
            conf,
            schedule,
            length,
            catch_up,
            random.Random(seed + p),
        )
        counts.append(by_m)
        caught.append([0.0, fed])
    widest = max(max(c, default=1) for by_m in counts for c in by_m)
    passes = np.zeros((len(counts), 2, widest))
    for p, by_m in enumerate(counts):
        for i, sizes in enumerate(by_m):
            for m, c in sizes.items():
                passes[p, i, m - 1] = c
    m = np.arange(1, widest + 1)
    prices = np.array([cascade.pass_cost.at(i, m) for i in range(2)], dtype=float)
    return Replay(
        np.array([t.size for t in traces], dtype=float),
        passes,
        prices,
        cascade.pass_cost.unit,
        model_set,
        models,
        np.array(caught),
        cascade.pass_cost.row_cost.copy(),
        cascade.pass_cost.row_step.copy(),
        np.array([0.0, 1.0]),  # the drafter is a leaf: one row per pass
    )
