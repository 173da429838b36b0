"""Predictions at the context lengths a workload has: a model set priced at one context
length, and the speed-up of a workload whose prompts sit at different lengths.

A model set with ``context_cost`` (:mod:`ewif.files.context_cost`) prices a pass over ``m``
positions after ``L`` cached tokens as ``c_i(m, L)``, and one autoregressive token as
``a(L)``, both in the unit of its curves. :func:`at_context` gives the set in units of one
autoregressive token at ``L`` (what a cascade at that length is compared with). A workload of
prompts ``p``, each generating ``n_p`` tokens around a mean context ``L_p``, then runs at

    S = Σ_p n_p·a(L_p) / Σ_p a(L_p)·E[C_{L_p}(n_p)],

autoregressive seconds over the method's, where ``E[C_L(n)]`` is the exact expected cost of a
generation of ``n`` tokens at ``L`` in its own unit (Theorem FL,
:meth:`ewif.kernel.cascade.Cascade.generation_cost`) — prompts whose autoregressive tokens
cost more weigh more, as they do in a run's wall time. Without ``context_cost`` every ``a`` is
1 and every ``L`` prices alike: ``S`` is the Theorem FL EWIF of the generations' lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ewif.base import validate
from ewif.base.row_cost import max_row_cost, max_row_step
from ewif.files.model_set import ModelSet


def at_context(model_set: ModelSet, length: float) -> ModelSet:
    """``model_set`` priced at cached context length ``length``: its curves ``c_i(m, L) /
    a(L)``, row costs ``h_i / a(L)`` and row steps ``s_i / a(L)`` (each at most what its curve
    admits); itself when it has no ``context_cost`` (one curve for every context)."""
    cc = model_set.context_cost
    if cc is None or model_set.cost_curve is None:
        return model_set
    curves = cc.curves_at(model_set.cost_curve, length)
    rows = model_set.row_cost
    if rows is not None:
        rows = np.minimum(rows / cc.unit_at(length), [max_row_cost(c) for c in curves])
    steps = model_set.row_step
    if steps is not None:
        h = np.zeros(len(curves)) if rows is None else rows
        limit = [max(max_row_step(c, hi), 0.0) for c, hi in zip(curves, h, strict=True)]
        steps = np.minimum(steps / cc.unit_at(length), limit)
    return replace(
        model_set,
        cost=np.array([c[0] for c in curves]),
        cost_curve=curves,
        row_cost=rows,
        row_step=steps,
        context_cost=None,
        metadata={**model_set.metadata, "context_tokens": float(length)},
    )


def workload_speedup(
    model_set: ModelSet,
    models: Sequence[str],
    K: object,
    lenience: float,
    prompts: Sequence[tuple[float, int]],
) -> float:
    """``S`` of the module docstring for the configuration ``models``/``K``/``lenience``
    over ``prompts``, each ``(mean context length L_p, generated tokens n_p >= 1)``."""
    if not prompts:
        raise ValueError("prompts must hold at least one (context length, tokens) pair")
    ar = method = 0.0
    for length, n in prompts:
        n = validate.count("generated tokens", n, minimum=1)
        priced = at_context(model_set, validate.cost("context length", length))
        unit = 1.0 if model_set.context_cost is None else model_set.context_cost.unit_at(length)
        cascade = priced.to_cascade(models, np.asarray(K), lenience)
        ar += n * unit
        method += unit * cascade.generation_cost(n)
    return ar / method
