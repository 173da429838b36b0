"""The quick-look bounds of the numerics search: what a candidate could score at most.

Before any curve is timed, every neural model's passes over ``m = 1..4`` positions are
timed on one context, the first measuring prompt (not a shorter one: on this project's AMD
machine float16 passes at 2 threads ran 20–25 % slower after 16 tokens than after the whole
84-token prompt, so a floor timed there was no floor and excluded a candidate that scored
above the choice). If no pass of model ``i`` over ``m >= 2`` positions costs less than
``min_{2 <= m' <= 4} t_i(m')`` (a pass never gets cheaper with more positions beyond the
first two, on every curve this project has timed), and a proposer costs nothing, then the
*floor* curves

    ℓ_i(1) = t_i(1),  ℓ_i(m) = min_{m <= m' <= 4} t_i(m')  (2 <= m <= 4),
    ℓ_i(m) = min_{2 <= m' <= 4} t_i(m')  (m > 4)

are below every real pass cost, and since a configuration's throughput only rises when a
pass gets cheaper, the recommendation on the floors (with the measured α) bounds every
configuration's throughput.

**The score bound** (:func:`throughput_bound`): ``U = max(EWIF*_floor, 1) / (ℓ_0(1)·(1 − ε))``
tokens/s (autoregressive decoding pays at least the target's one-token pass; ``ε``,
:data:`QUICK_NOISE`, covers the quick look's own timing error). It bounds the candidate's
score ``S``, hence its assured throughput ``A <= S`` (:mod:`realrun.numerics_choice`).

**The assured bound** (:func:`assured_bound`), for the ``assured`` choice rule. ``A`` is
``max(min(q_0.05(EWIF_b(C)), EWIF*), 1) / t_AR``: the 5th percentile, over the bootstrap
replicates ``b`` of the measuring prompts (:mod:`ewif.predict.bootstrap`), of the chosen
configuration ``C``'s EWIF. On every replicate, the best configuration on the floors beats
``C`` on the real curves (the argument above, replicate by replicate: the same resampled
α, cheaper passes), so ``EWIF*_floor,b / ℓ_0(1) >= EWIF_b(C) / t_AR`` in tokens/s; a
quantile keeps the order of two samples compared draw by draw, so

    U_A = max(q_0.05(EWIF*_floor,b), 1) / (ℓ_0(1)·(1 − ε))  >=  A,

with the replicates drawn as the candidate's own interval draws them (the same seed and
count, the prompts drawn alike: the floors carry standard errors of 0, which consume the
same random numbers and leave the floors as they are). Two allowances are the score bound's
too: the real curves' drawn costs stay above the floors less ``ε`` (their standard errors are
a few per cent where ``ε`` is 10 %), and ``EWIF*`` is the search's exact optimum over the same
space. The assured bound is tighter where the drafts' acceptance is uncertain: on the Xeon
search a float32 × 1 candidate scored 3.07 tokens/s against a score bound of 4.68, its
assured throughput 2.68 — 0.87 of its score — below the leader's assured 4.19; its short
curve had cost 156 s. It costs a recommendation per replicate (200 of ~50 ms for a
three-model family), so the search computes it only where the score bound does not already
exclude the candidate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from ewif.base.resampling import LEVEL, REPLICATES
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.model_set import ModelSet
from ewif.predict.bootstrap import replicate_sets
from ewif.search.recommendation import recommend
from realrun.pass_timing import PassTiming
from realrun.timing import time_passes
from simulate.decoder.interface import TokenModel

#: Relative timing error the quick-look bounds allow for (``ε``, module docstring).
QUICK_NOISE = 0.1
#: Positions the quick look times every neural model's passes at.
QUICK_M = 4
#: Timed repeats of each quick-look pass (after one warm-up); the quick look keeps the
#: fastest of them, so one stalled pass cannot lift a floor (in a shipped run the mean of two
#: timings of an 8 ms pass came to 1.17 s and excluded the faster candidate), and the bound
#: allows for the rest of their error (:data:`QUICK_NOISE`).
QUICK_REPEATS = 2


def fastest(timing: PassTiming) -> list[float]:
    """A quick look's ``t(1..M)``: the fastest of each ``m``'s timed passes (a floor, as the
    bound wants; one stalled pass does not move it)."""
    return [float(min(values)) for values in timing.samples]


def quick_passes(chain: Sequence, context: list[int], warmup: int) -> dict[str, list[float]]:
    """The quick look on one context: every neural model's :func:`fastest` pass seconds at
    ``m = 1..``:data:`QUICK_M` over :data:`QUICK_REPEATS` timings (after ``warmup`` rounds)."""
    return {
        m.name: fastest(time_passes(m, context, QUICK_M, QUICK_REPEATS, warmup))
        for m in chain
        if isinstance(m, TokenModel)
    }


def floor_curve(seconds: Sequence[float]) -> np.ndarray:
    """``ℓ(m)`` for ``m = 1..M+1`` from a quick look's ``t(1..M)`` (module docstring):
    ``t(1)``, the running minimum from the right for ``m >= 2``, then the floor of ``m >= 2``
    once more, so that ewif's extension rule (the line through the last two points, flat
    where it would fall) continues it flat."""
    t = np.asarray(seconds, dtype=float)
    if t.size < 2 or not np.isfinite(t).all() or (t <= 0).any():
        raise ValueError(f"a quick look needs pass times > 0 at m = 1, 2, …, got {t.tolist()}")
    right = np.minimum.accumulate(t[::-1])[::-1]
    right[0] = t[0]
    return np.append(right, right[1])


def _floors(
    names: Sequence[str], alpha: Mapping[float, np.ndarray], quick: Mapping[str, Sequence[float]]
) -> tuple[ModelSet, float]:
    """The model set on the floor curves (in units of the target's floor ``ℓ_0(1)``) with the
    measured α, and ``ℓ_0(1)`` in seconds."""
    floors = {n: floor_curve(quick[n]) for n in names if n in quick}
    unit = floors[names[0]][0]
    curves = tuple(floors[n] / unit if n in floors else np.array([0.0]) for n in names)
    curves[0][0] = 1.0
    optimistic = ModelSet(
        models=tuple(names),
        cost=np.array([c[0] for c in curves]),
        cost_per_token=np.zeros(len(names)),
        alpha=dict(alpha),
        cost_curve=curves,
    )
    return optimistic, float(unit)


def _check_noise(noise: float) -> float:
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must be in [0, 1), got {noise!r}")
    return noise


def throughput_bound(
    names: Sequence[str],
    alpha: Mapping[float, np.ndarray],
    quick: Mapping[str, Sequence[float]],
    k_max: int,
    noise: float = QUICK_NOISE,
) -> float:
    """``U`` of the module docstring, tokens/s: ``quick[name]`` holds a neural model's
    seconds at ``m = 1..M`` (the target's first); a model without one is a proposer (cost 0).
    ``alpha`` is the measured acceptance (lenience -> matrix)."""
    _check_noise(noise)
    optimistic, unit = _floors(names, alpha, quick)
    best = max(recommend(optimistic, k_max=k_max).ewif, 1.0)
    return best / (unit * (1.0 - noise))


def assured_bound(
    names: Sequence[str],
    alpha: Mapping[float, np.ndarray],
    by_prompt: Mapping[tuple[float, int, int], np.ndarray],
    quick: Mapping[str, Sequence[float]],
    k_max: int,
    noise: float = QUICK_NOISE,
) -> float:
    """``U_A`` of the module docstring, tokens/s: :func:`throughput_bound`'s arguments and
    the per-prompt acceptance sums and counts (``acceptance_by_prompt`` of
    :class:`ewif.files.bootstrap_data.BootstrapData`) the candidate's interval resamples."""
    _check_noise(noise)
    optimistic, unit = _floors(names, alpha, quick)
    stderr = tuple(np.zeros(c.size) for c in optimistic.cost_curve)
    optimistic = replace(optimistic, bootstrap=BootstrapData(dict(by_prompt), stderr))
    best = [recommend(r, k_max=k_max).ewif for r in replicate_sets(optimistic, REPLICATES)]
    low = float(np.quantile(best, (1 - LEVEL) / 2))
    return max(low, 1.0) / (unit * (1.0 - noise))
