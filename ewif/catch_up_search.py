"""The exact optimizer under the catch-up pass (:mod:`ewif.catch_up`), best first.

The catch-up pass couples a model's cost to the previous step, which breaks the block
separability behind the vectorised search, so the search runs in two exact stages:

1. **Upper bounds.** Every pass of a catch-up model feeds at least the positions the paper's
   accounting gives it, pass by pass (Theorem CU). With its curve replaced by the lower
   envelope ``c⁻(m) = min_{m' >= m} c(m')`` (non-decreasing, ``c⁻ <= c``; the extension
   beyond the measured range never decreases, so the suffix minimum of the table is the
   minimum of the whole curve there), the plain EWIF of every configuration is an upper
   bound on its catch-up EWIF: ``c(m_catch-up) >= c⁻(m_catch-up) >= c⁻(m_plain)``. The
   vectorised exhaustive search ranks the configurations by that bound.
2. **Exact evaluation, best first.** The ``T`` best bounds are evaluated exactly with
   :class:`ewif.cascade.Cascade` (catch-up on); once the ``top``-th best exact value is at
   least the ``T``-th bound, no configuration outside can enter the top (its bound, hence
   its value, is lower). Otherwise ``T`` grows fourfold.

Dinkelbach needs separable costs and refuses catch-up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ewif import validate
from ewif.cascade import Cascade
from ewif.io import ModelSet

_FIRST_ROUND = 32


def lower_envelope(curve: np.ndarray) -> np.ndarray:
    """``c⁻(m) = min_{m' >= m} c(m')`` over the measured table (a non-decreasing curve)."""
    return np.minimum.accumulate(np.asarray(curve, dtype=float)[::-1])[::-1]


def bounding_set(model_set: ModelSet, flags: Sequence[bool]) -> ModelSet:
    """The model set whose plain EWIF bounds the catch-up EWIF from above: the curves of the
    catch-up models replaced by their lower envelopes (affine costs have ``cost_per_token
    >= 0`` and are already non-decreasing)."""
    if model_set.cost_curve is None:
        return model_set
    pairs = zip(model_set.cost_curve, flags, strict=True)
    curves = tuple(lower_envelope(c) if flag else c for c, flag in pairs)
    cost = np.array([c[0] for c in curves])
    return dataclasses.replace(model_set, cost=cost, cost_curve=curves)


def catch_up_flags(model_set: ModelSet, catch_up: object | None) -> tuple[bool, ...] | None:
    """Validated flags, one per model of the set (None: the set's own, if any)."""
    flags = getattr(model_set, "catch_up", None) if catch_up is None else catch_up
    if flags is None:
        return None
    return tuple(bool(v) for v in validate.flags("catch_up", flags, len(model_set.models)))


def exact_catch_up(model_set: ModelSet, flags: tuple[bool, ...], config, fill: str):
    """``config`` re-evaluated with the catch-up pass (same models, K and lenience)."""
    idx = [model_set.index(m) for m in config.models]
    cascade = Cascade.from_model_set(
        model_set,
        config.models,
        config.K,
        config.lenience,
        fill=fill,
        catch_up=[flags[i] for i in idx],
    )
    return dataclasses.replace(config, ewif=cascade.ewif())


def optimize_catch_up(search, model_set: ModelSet, flags: tuple[bool, ...], top: int, **kwargs):
    """Best-first exact search (module docstring); ``search`` is the plain exhaustive
    optimizer (:func:`ewif.search.optimize`), ``kwargs`` its search-space arguments."""
    bounds_set = bounding_set(model_set, flags)
    rows = max(_FIRST_ROUND, top)
    while True:
        plain = (False,) * len(model_set.models)
        bound = search(bounds_set, method="exhaustive", top=rows, catch_up=plain, **kwargs)
        exact = [exact_catch_up(model_set, flags, c, kwargs["fill"]) for c in bound.table]
        exact.sort(key=lambda c: -c.ewif)
        complete = len(bound.table) < rows or bound.interrupted
        if complete or exact[min(top, len(exact)) - 1].ewif >= bound.table[-1].ewif:
            return dataclasses.replace(
                bound,
                best=exact[0],
                table=exact[:top],
                model_set=model_set,
                catch_up=flags,
                method="exhaustive+catch-up",
            )
        rows *= 4
