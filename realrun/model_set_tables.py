"""Human-readable tables of a model set: its pass costs and α (what ``csd measure`` prints) and
the logit rows it prices (also a line of a run's report, :mod:`realrun.results_tables`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ewif.files.model_set import ModelSet
from ewif.search.mix import alpha_by_category_table


def format_model_set(model_set: ModelSet) -> str:
    """Pass costs (in target one-token passes: the curve at a few ``m`` when the set has
    curves, else cost and cost per token) and α of every measured pair."""
    names = model_set.models
    width = max(len(n) for n in names)
    curves = model_set.cost_curve
    if curves is not None:
        shown = [m for m in (1, 2, 3, 4, 8, 12, 16, 24, 32) if m <= max(len(c) for c in curves)]
        rows = [f"{'model':<{width}}  pass cost at m = " + " ".join(f"{m:>6}" for m in shown)]
        for n, c in zip(names, curves, strict=True):
            vals = " ".join(f"{c[m - 1]:6.3f}" if m <= len(c) else f"{'':>6}" for m in shown)
            rows.append(f"{n:<{width}}  {'':>17}{vals}")
    else:
        rows = [f"{'model':<{width}}  cost   cost/token"]
        for n, c, t in zip(names, model_set.cost, model_set.cost_per_token, strict=True):
            rows.append(f"{n:<{width}}  {c:.4f} {t:.4f}")
    for lenience in model_set.leniences:
        mat = model_set.alpha[lenience]
        pairs = [
            f"{names[r]}<-{names[j]} {mat[r, j]:.3f}"
            for r in range(len(names))
            for j in range(r + 1, len(names))
            if not np.isnan(mat[r, j])
        ]
        rows.append(f"alpha (lenience {lenience:g}): " + ", ".join(pairs))
    if model_set.categories is not None:
        rows += ["α per category (lenience 1):", alpha_by_category_table(model_set)]
    return "\n".join([*rows, *row_cost_lines(model_set.to_dict())])


def row_cost_lines(model_set: dict) -> list[str]:
    """One line per drafter whose logit rows the model set prices (``row_cost`` and
    ``row_step``, a stored model set as a mapping): the row's cost in AR tokens and as timed,
    with its error, and the second row's step where priced."""
    timing = (model_set.get("metadata") or {}).get("timing") or {}
    row_cost = model_set.get("row_cost")
    if not row_cost:
        return []
    steps = model_set.get("row_step") or [0.0] * len(row_cost)
    lines = []
    for name, h, s in zip(model_set["models"], row_cost, steps, strict=True):
        if not (h or s):
            continue
        t = timing.get(name) or {}
        step = f"; the second row {s:.4f} more{_timed(t, 'row_step_seconds')}, taken off each "
        lines.append(
            f"{name}: one logit row costs {h:.4f} AR tokens{_timed(t, 'row_seconds')}, taken "
            "off each catch-up position (it returns none)"
            + (step + "catch-up pass returning one row" if s else "")
        )
    return lines


def _timed(timing: Mapping[str, Any], key: str) -> str:
    """`` (x ± se ms as timed)`` of a timing record's ``key``, or nothing."""
    se = 1000 * timing.get(key + "_stderr", 0.0)
    return f" ({1000 * timing[key]:.2f} ± {se:.2f} ms as timed)" if key in timing else ""
