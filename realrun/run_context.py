"""The timed costs priced at the contexts a run decoded, from a model set's c(m, L).

A model set's curves are timed at the measuring prompts' contexts (their mean ``L̄``); a run
decodes its held-out prompts, whose contexts may be longer or shorter. With the set's
``context_cost`` (:mod:`ewif.files.context_cost`, fitted by :mod:`realrun.context_fit`):

* :func:`run_context` — the run's mean cached context, ``Σ_p n_p (L_p + n_p/2) / Σ_p n_p``
  over its prompts (prompt length ``L_p``, ``n_p`` generated tokens): where its passes and
  its autoregressive tokens fall, weighted as its wall time weighs them;
* :func:`timing_at` — the measuring phase's pass seconds (``metadata.timing``) and its
  autoregressive seconds per token moved to a context length, for the in-run agreement
  (:func:`realrun.books.timing_agreement`) to compare like with like;
* :func:`pass_seconds_at` — one model's timed pass at one size moved to a context length,
  for the agreement to compare each size's in-run passes at the mean context *they* ran
  after (a catch-up after an accepted Max-Gram token falls where Max-Gram is accepted: in
  answers copied from long documents);
* :func:`context_predictions` — every sd/csd method predicted at each held-out prompt's own
  context (:func:`ewif.predict.context.workload_speedup`) next to what it measured.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.files.results import Results
from ewif.predict.context import workload_speedup
from realrun.predictions import is_tree_config, method_lengths


def run_context(prompt_tokens: Sequence[int], generated: Sequence[int]) -> float:
    """``Σ_p n_p (L_p + n_p/2) / Σ_p n_p`` (module docstring)."""
    L = np.asarray(prompt_tokens, dtype=float)
    n = np.asarray(generated, dtype=float)[: L.size]
    if n.sum() <= 0:
        return float(L.mean())
    return float((n * (L[: n.size] + n / 2)).sum() / n.sum())


def timing_at(model_set: ModelSet, length: float) -> tuple[dict, float] | None:
    """``(metadata.timing moved to context length, seconds per autoregressive token there)``
    of ``model_set`` (its ``context_cost`` in seconds: slopes × the unit); None without a
    ``context_cost`` or a timed unit, or where the fit prices an AR token at or below 0.
    A length outside the fit's span is priced at its nearest edge."""
    cc = model_set.context_cost
    unit = model_set.metadata.get("ar_seconds_per_token")
    if cc is None or not unit:
        return None
    try:
        at = cc.unit_at(length)
    except ValueError:
        return None
    moved = {}
    for name in model_set.models:
        grid = (model_set.metadata.get("timing") or {}).get(name) or {}
        if "m" in grid:
            seconds = [pass_seconds_at(model_set, name, m, length) for m in grid["m"]]
            grid = {**grid, "seconds": seconds}
        moved[name] = grid
    return moved, unit * at


def pass_seconds_at(model_set: ModelSet, name: str, m: int, length: float) -> float:
    """The measuring phase's seconds of model ``name``'s pass over ``m`` positions after
    ``length`` cached tokens: its timed grid interpolated at ``m`` plus
    ``(L − L̄)·slope(m)`` in seconds (``context_cost``; a length outside the fit's span at
    its nearest edge) — what :func:`realrun.books.timing_agreement` compares a size's
    in-run passes with at their own mean context. ValueError without the model's grid, a
    ``context_cost`` or a timed unit."""
    cc = model_set.context_cost
    unit = model_set.metadata.get("ar_seconds_per_token")
    grid = (model_set.metadata.get("timing") or {}).get(name) or {}
    if cc is None or not unit or "m" not in grid:
        raise ValueError(f"no timed grid and context_cost to price {name!r} at a context")
    slope = cc.slope[model_set.index(name)]
    per_m = float(np.interp(m, np.arange(1, slope.size + 1), slope))
    shift = cc.priced_length(length) - cc.tokens
    return float(np.interp(m, grid["m"], grid["seconds"])) + shift * per_m * unit


def context_predictions(
    results: Results, model_set: ModelSet, prompt_tokens: Sequence[int]
) -> dict[str, dict]:
    """Per sd/csd chain method: the speed-up predicted at each held-out prompt's own context
    (``point``) and ``|point/measured − 1|``, with how many prompts' contexts fell outside
    the fit's span (``outside_span``: priced at its nearest edge); empty without a
    ``context_cost``. Where the fit prices an AR token at or below 0, the method's ``point``
    and ``error`` are None and ``refused`` says why: a finished run is never lost to a
    fit. Token trees are priced at one curve only."""
    cc = model_set.context_cost
    if cc is None:
        return {}
    out: dict[str, dict] = {}
    for m in results.methods:
        if m.kind not in ("sd", "csd") or not m.speedup or is_tree_config(m.config):
            continue
        lengths = method_lengths(results, m.name)
        prompts = [(L + n / 2, n) for L, n in zip(prompt_tokens, lengths, strict=False) if n]
        c = m.config
        try:
            point = workload_speedup(model_set, c["models"], c["K"], c["lenience"], prompts)
        except ValueError as e:
            out[m.name] = {"point": None, "error": None, "refused": str(e)}
            continue
        outside = sum(cc.priced_length(length) != length for length, _ in prompts)
        out[m.name] = {
            "point": point,
            "error": abs(point / m.speedup - 1.0),
            "outside_span": outside,
        }
    return out
