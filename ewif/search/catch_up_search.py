"""The exact optimizer under the catch-up pass (:mod:`ewif.kernel.catch_up`), best first.

The catch-up pass couples a model's cost to the previous step, which breaks the block
separability behind the vectorised search, so the search runs in two exact stages:

1. **Upper bounds.** Every pass of a catch-up model feeds at least the positions the paper's
   accounting gives it, pass by pass (Theorem CU), and returns that many logit rows: a pass
   of paper size ``r`` that feeds ``m >= r`` costs ``c(m) − h·(m − r)``
   (:mod:`ewif.kernel.pass_cost`, row cost ``h``). With its curve replaced by

       b(r) = h·r + min_{m >= r} (c(m) − h·m)      (b <= c; h = 0: the lower envelope)

   the plain EWIF of every configuration is an upper bound on its catch-up EWIF. The
   extension beyond the measured range ``M`` has slope ``s >= h``, so ``c(m) − h·m`` never
   decreases there and the minimum is over ``m <= M + 1``, and ``b = c`` beyond ``M``. A
   **row step** ``s`` (:mod:`ewif.kernel.pass_cost`, "Row step") makes a one-row pass
   (``r = 1``) that feeds ``m >= 2`` cost ``s`` less still, ``c(m) − h·(m − 1) − s``, and
   changes no pass with ``r >= 2`` (its ``m >= r >= 2`` rows drop ``ρ(m) − ρ(r) = h·(m −
   r)``); so ``b(1)`` becomes ``min(c(1), h + min_{m >= 2} (c(m) − h·m) − s)`` (``>= 0`` as
   ``s`` is at most :func:`~ewif.base.row_cost.max_row_step`) and ``b(r >= 2)`` stays: each
   pass still costs at least ``b`` of its paper size, so the bound stays valid. An affine
   model with a step is bounded through its exact three-point curve ``c(1..3)``. The
   vectorised exhaustive search ranks the configurations by that bound.
2. **Exact evaluation, best first.** The ``T`` best bounds are evaluated exactly with
   :class:`ewif.kernel.cascade.Cascade` (catch-up on); once the ``top``-th best exact value is at
   least the ``T``-th bound, no configuration outside can enter the top (its bound, hence
   its value, is lower). Otherwise ``T`` grows fourfold.

Dinkelbach needs separable costs and refuses catch-up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ewif.base import validate
from ewif.files.model_set import ModelSet

_FIRST_ROUND = 32


def catch_up_bound(curve: np.ndarray, slope: float, h: float, step: float = 0.0) -> np.ndarray:
    """``b(r) = h·r + min_{m >= r} (c(m) − h·m)`` for ``r = 1..M + 1`` (module docstring):
    the measured table ``c(1..M)``, its extension slope ``slope >= h`` and row cost ``h``;
    with a row step ``step``, ``b(1) = min(c(1), h + min_{m >= 2} (c(m) − h·m) − step)``.
    ``b >= 0`` since ``h`` is at most :func:`ewif.kernel.pass_cost.max_row_cost`; at that bound the
    sum can round a few ulps below 0, which is taken to 0."""
    y = np.asarray(curve, dtype=float)
    y = np.append(y, y[-1] + slope)
    m = np.arange(1, y.size + 1)
    b = h * m + np.minimum.accumulate((y - h * m)[::-1])[::-1]
    if step:
        b[0] = min(y[0], h + float((y[1:] - h * m[1:]).min()) - step)
    return np.maximum(b, 0.0)


def bounding_set(model_set: ModelSet, flags: Sequence[bool]) -> ModelSet:
    """The model set whose plain EWIF bounds the catch-up EWIF from above: the curves of the
    catch-up models replaced by :func:`catch_up_bound` and priced at the paper's rows
    (affine costs have ``cost_per_token >= h``: a catch-up position never makes a pass
    cheaper than the paper's, so they are their own bound — unless a catch-up model has a row
    step: then every model is read as its exact curve ``c(1..3)``)."""
    pc = model_set.pass_cost
    stepped = any(f and s for f, s in zip(flags, pc.row_step, strict=True))
    if model_set.cost_curve is None and not stepped:
        return model_set
    table = model_set.cost_curve or tuple(pc.at(i, np.arange(1, 4)) for i in range(pc.n_models))
    curves = tuple(
        catch_up_bound(c, *_extension(pc, i, c.size), float(pc.row_step[i])) if flag else c
        for i, (c, flag) in enumerate(zip(table, flags, strict=True))
    )
    cost = np.array([c[0] for c in curves])
    return dataclasses.replace(
        model_set,
        cost=cost,
        cost_per_token=np.zeros(cost.size),
        cost_curve=curves,
        row_cost=None,
        row_step=None,
        bootstrap=None,
        cascade=None,
    )


def _extension(pc, i: int, size: int) -> tuple[float, float]:
    """``(slope, h)``: model ``i``'s rise beyond its first ``size`` points and row cost."""
    return float(pc.at(i, size + 1) - pc.at(i, size)), float(pc.row_cost[i])


def resolved_catch_up(model_set: ModelSet, catch_up: object | None) -> tuple[bool, ...] | None:
    """Validated flags, one per model of the set (None: the set's own, if any)."""
    flags = getattr(model_set, "catch_up", None) if catch_up is None else catch_up
    if flags is None:
        return None
    return tuple(bool(v) for v in validate.flags("catch_up", flags, len(model_set.models)))


def exact_catch_up(model_set: ModelSet, flags: tuple[bool, ...], config, fill: str):
    """``config`` re-evaluated with the catch-up pass (same models, K and lenience)."""
    idx = [model_set.index(m) for m in config.models]
    cascade = model_set.to_cascade(
        config.models,
        config.K,
        config.lenience,
        fill=fill,
        catch_up=[flags[i] for i in idx],
    )
    return dataclasses.replace(config, ewif=cascade.ewif())


def optimize_catch_up(search, model_set: ModelSet, flags: tuple[bool, ...], top: int, **kwargs):
    """Best-first exact search (module docstring); ``search`` is the plain exhaustive
    optimizer (:func:`ewif.search.optimizer.optimize`), ``kwargs`` its search-space arguments."""
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
