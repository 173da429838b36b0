"""An interval on a mix's speed-up: the bootstrap over measuring prompts, within categories.

The mix's speed-up ``S_mix = 1 / Σ_c w_c / S_c`` (Theorem MX, :mod:`ewif.kernel.mixture`)
depends on each category's α, measured on that category's prompts only. A replicate
therefore resamples prompts **within each category** (a stratified bootstrap: category ``c``
draws its ``P_c`` prompts with replacement from its own, so a replicate never trades a
category's prompts for another's), widens each category's deviation by its own
``√(P_c/(P_c−1))·t_{P_c−1}/z`` (:func:`ewif.predict.bootstrap.expansion`), draws the cost
curves once (one machine prices every category: the same draw for all, as in
:mod:`ewif.predict.bootstrap`), prices each category at its replicate α and combines them by
Theorem MX. The percentile interval of the replicates is a confidence interval for the
expected speed-up on the mix; with ``held_out_prompts`` (per category, the prompts a run will
measure on) each category's draw is two-stage as in :mod:`ewif.predict.bootstrap`, a
prediction interval for that run. A category of weight 0 is not drawn; one of positive weight
needs at least two prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from ewif.base import validate
from ewif.files.categories import Category, Mix, category_set
from ewif.files.model_set import ModelSet
from ewif.kernel.mixture import mixture_speedup
from ewif.predict.bootstrap import (
    LEVEL,
    REPLICATES,
    PredictionInterval,
    drawn_curves,
    drawn_rows,
    expansion,
    prompt_draw,
)

Config = tuple[Sequence[str], object, float]


def drawn_alpha(
    category: Category,
    rng: np.random.Generator,
    level: float,
    held_out_prompts: int | None = None,
) -> dict[float, np.ndarray]:
    """One replicate of ``category``'s α: its prompts resampled (two-stage with
    ``held_out_prompts``), each deviation widened by :func:`expansion` and clipped to [0, 1]."""
    widen = expansion(category.n_prompts, level)
    idx = prompt_draw(rng, category.n_prompts, held_out_prompts)
    alpha = {x: m.copy() for x, m in category.alpha.items()}
    for (lenience, r, j), table in category.acceptance_by_prompt.items():
        s, n = table[idx].sum(axis=0)
        point = category.alpha[lenience][r, j]
        value = s / n if n > 0 else point
        value = min(max(point + widen * (value - point), 0.0), 1.0)
        for target in alpha if r == 0 else (lenience,):
            alpha[target][r, j] = value
    return alpha


def mix_intervals(
    model_set: ModelSet,
    mix: Mix,
    configs: Sequence[Config],
    *,
    level: float = LEVEL,
    replicates: int = REPLICATES,
    seed: int = 0,
    held_out_prompts: Mapping[str, int] | None = None,
    fill: str = "tokens",
    max_new_tokens: int | None = None,
) -> list[PredictionInterval]:
    """The speed-up on ``mix`` of every ``(models, K, lenience)`` in ``configs`` and its
    stratified-bootstrap interval (module docstring), on one set of replicates."""
    mix.checked(model_set.categories)
    expansion(2, level)  # checks the level
    b = validate.count("replicates", replicates, minimum=2)
    held = dict(held_out_prompts or {})
    for name in mix.used:
        if model_set.categories[name].n_prompts < 2:
            raise ValueError(
                f"category {name!r} was measured on 1 prompt: an interval on the mix needs "
                "at least 2 prompts of every category it weighs"
            )
    rng = np.random.default_rng(validate.count("seed", seed))
    stderr = None if model_set.bootstrap is None else model_set.bootstrap.cost_curve_stderr
    base = {name: category_set(model_set, name) for name in mix.used}
    values = np.empty((b, len(configs)))
    for i in range(b):
        alphas = {n: drawn_alpha(model_set.categories[n], rng, level, held.get(n)) for n in base}
        costs = {}
        if stderr is not None and model_set.cost_curve is not None:
            curves = drawn_curves(model_set.cost_curve, stderr, rng)
            costs = {"cost_curve": curves, "cost": np.array([c[0] for c in curves])}
            costs.update(drawn_rows(model_set, curves))
        sets = {n: replace(s, alpha=alphas[n], **costs) for n, s in base.items()}
        values[i] = [_speedup(sets, mix, c, fill, max_new_tokens) for c in configs]
    out = []
    for j, config in enumerate(configs):
        point = _speedup(base, mix, config, fill, max_new_tokens)
        low, high = np.quantile(values[:, j], [(1 - level) / 2, (1 + level) / 2])
        out.append(PredictionInterval(point, float(low), float(high), level))
    return out


def _speedup(
    sets: Mapping[str, ModelSet], mix: Mix, config: Config, fill: str, n: int | None
) -> float:
    """``S_mix`` of ``config`` with each category priced by its set in ``sets``."""
    models, K, lenience = config
    by = {}
    for name, ms in sets.items():
        flags = None if ms.catch_up is None else [ms.catch_up[ms.index(m)] for m in models]
        cascade = ms.to_cascade(models, np.asarray(K), lenience, fill=fill, catch_up=flags)
        by[name] = cascade.ewif(n)
    return mixture_speedup(by, mix.weights)
