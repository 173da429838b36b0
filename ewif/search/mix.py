"""The best configuration for a workload's mix of categories, exactly (Theorem MX).

A model set with α per category (``alpha_by_category``, :mod:`ewif.files.categories`) prices
a configuration on a :class:`~ewif.files.categories.Mix` by Theorem MX
(:mod:`ewif.kernel.mixture`): each category's exact EWIF ``S_c`` at its own α, combined as
``S_mix = 1 / Σ_c w_c / S_c`` — not the EWIF at the mix-weighted α, which
:func:`mix_prediction` reports beside it (``pooled``) to show the difference.

**The search** (:func:`recommend_mix`) finds the configuration of highest ``S_mix`` in the
recommendation's space (:func:`ewif.search.space.search_space`), with a certificate:

1. every used category's own optimum ``S_c*`` (:func:`ewif.search.optimizer.optimize`);
2. ``L``, the best ``S_mix`` among those optima;
3. a configuration ``x`` with ``S_mix(x) >= L`` has ``Σ_c w_c/S_c(x) <= 1/L`` and
   ``w_d/S_d(x) >= w_d/S_d*`` for every ``d``, so for a pivot category ``p``

       S_p(x) >= τ = w_p / (1/L − Σ_{d≠p} w_d/S_d*);

   the optimizer's exact top-``N`` table of ``p`` (best-first, ties kept) holds every
   configuration with ``S_p >= τ`` once its last row is below ``τ`` (or the space is
   exhausted); ``N`` grows fourfold from 32 until then, each row priced on the mix (``L`` and
   ``τ`` rise as better rows are found). The pivot is the category of largest ``w_c/S_c*``,
   whose cut is the tightest. Past ``max_rows`` rows the answer is the best found and
   ``certified`` is False.

Equivalent configurations (the optimizer merges them) have the same ``S_c`` for every α.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ewif.base.configuration import Configuration
from ewif.base.text_table import table
from ewif.files.categories import Mix, category_set
from ewif.files.model_set import ModelSet
from ewif.kernel.mixture import mixture_speedup
from ewif.search import explain
from ewif.search.optimizer import optimize
from ewif.search.space import search_space, space_size

_FIRST_ROWS = 32


def catch_up_of(model_set: ModelSet, models: Sequence[str]) -> list[bool] | None:
    """The set's catch-up flags of ``models`` (None when the set has none)."""
    flags = model_set.catch_up
    return None if flags is None else [flags[model_set.index(m)] for m in models]


def category_speedups(
    model_set: ModelSet,
    mix: Mix,
    models: Sequence[str],
    K: object,
    lenience: float = 1.0,
    *,
    fill: str = "tokens",
    max_new_tokens: int | None = None,
) -> dict[str, float]:
    """``S_c`` of the configuration on each category of positive weight: the exact EWIF at the
    category's α (of generations of ``max_new_tokens``, Theorem FL; endless when None)."""
    mix.checked(model_set.categories)
    flags = catch_up_of(model_set, models)
    return {
        name: category_set(model_set, name)
        .to_cascade(models, np.asarray(K), lenience, fill=fill, catch_up=flags)
        .ewif(max_new_tokens)
        for name in mix.used
    }


def mixed_alpha_set(model_set: ModelSet, mix: Mix) -> ModelSet:
    """The set with α the mix-weighted mean of the categories' (``Σ_c w_c α_c``): what pooling
    the positions of a measurement with the mix's shares would measure (Corollary MX.1)."""
    mix.checked(model_set.categories)
    alpha = {
        x: sum(w * model_set.categories[n].alpha[x] for n, w in mix.weights.items() if w > 0)
        for x in model_set.alpha
    }
    return replace(
        model_set,
        alpha=alpha,
        bootstrap=None,
        categories=None,
        alpha_by_position={},
        rank_acceptance=None,
    )


@dataclass(frozen=True)
class MixPrediction:
    """``speedup`` (Theorem MX), each category's ``S_c``, and ``pooled``: the EWIF of the same
    configuration at the mix-weighted α."""

    speedup: float
    by_category: dict[str, float]
    pooled: float


def mix_prediction(
    model_set: ModelSet,
    mix: Mix,
    models: Sequence[str],
    K: object,
    lenience: float = 1.0,
    *,
    fill: str = "tokens",
    max_new_tokens: int | None = None,
) -> MixPrediction:
    """The configuration's speed-up on ``mix`` (module docstring)."""
    by = category_speedups(
        model_set, mix, models, K, lenience, fill=fill, max_new_tokens=max_new_tokens
    )
    pooled = (
        mixed_alpha_set(model_set, mix)
        .to_cascade(
            models, np.asarray(K), lenience, fill=fill, catch_up=catch_up_of(model_set, models)
        )
        .ewif(max_new_tokens)
    )
    return MixPrediction(mixture_speedup(by, mix.weights), by, float(pooled))


@dataclass(frozen=True)
class MixRecommendation:
    """The best configuration on a mix: ``best.ewif`` is its ``S_mix``; ``prediction`` its
    per-category speed-ups and the pooled-α value; ``priced`` the configurations priced on
    the mix, ``certified`` whether the search proved the optimum (module docstring)."""

    mix: Mix
    best: Configuration
    prediction: MixPrediction
    priced: int
    certified: bool
    n_configurations: int
    seconds: float

    @property
    def decision(self) -> str:
        return explain.decision(self.best.ewif)

    def describe(self) -> str:
        what = self.best.describe()
        if self.decision == "speculative":
            return f"recommended for the mix: {what} at {self.best.ewif:.4f}x"
        return explain.autoregressive_line(what, self.best.ewif)

    def lines(self) -> list[str]:
        """The human report of the recommendation (``csd recommend --mix``)."""
        by = ", ".join(f"{n} {s:.3f}x" for n, s in self.prediction.by_category.items())
        proof = (
            "the optimum, certified"
            if self.certified
            else "the best found (not certified: raise max_rows)"
        )
        return [
            f"mix: {self.mix.describe()} (shares of the generated tokens)",
            self.describe(),
            f"  speed-up on the mix: {self.best.ewif:.4f}x = 1 / Σ w_c / S_c (Theorem MX); "
            f"{proof}, {self.priced} configurations priced of {self.n_configurations:,}",
            f"  per category S_c: {by}",
            f"  the same configuration at the mix-weighted α: {self.prediction.pooled:.4f}x "
            "(not the mix's speed-up)",
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mix": dict(self.mix.weights),
            "models": list(self.best.models),
            "K": self.best.K.tolist(),
            "lenience": self.best.lenience,
            "ewif": self.best.ewif,
            "decision": self.decision,
            "by_category": self.prediction.by_category,
            "ewif_at_pooled_alpha": self.prediction.pooled,
            "priced": self.priced,
            "certified": self.certified,
            "n_configurations": self.n_configurations,
            "seconds": self.seconds,
        }


def recommend_mix(
    model_set: ModelSet,
    mix: Mix,
    *,
    space: str = "auto",
    k_max: int | None = None,
    mag_block: int = 10,
    leniences: Sequence[float] | None = None,
    fill: str = "tokens",
    max_rows: int = 2048,
) -> MixRecommendation:
    """The configuration of highest ``S_mix`` (module docstring), in the space
    :func:`ewif.search.recommendation.recommend` searches."""
    started = time.perf_counter()
    mix.checked(model_set.categories)
    chosen = search_space(model_set, space, k_max, mag_block)
    lens = model_set.leniences if leniences is None else leniences
    space_size(model_set.alpha, len(model_set.models), chosen.bounds, lens, "lower k_max")
    sets = {name: category_set(model_set, name) for name in mix.used}
    w = mix.weights

    def top(name: str, rows: int):
        return optimize(
            sets[name],
            bounds=chosen.bounds,
            leniences=leniences,
            subsets=False,
            fill=fill,
            top=rows,
            method="exhaustive",
        )

    firsts = {name: top(name, 1) for name in sets}
    best_own = {name: r.best.ewif for name, r in firsts.items()}
    priced: dict[tuple, float] = {}

    def price(config: Configuration) -> float:
        key = (config.models, config.K.tobytes(), config.lenience)
        if key not in priced:
            by = category_speedups(
                model_set, mix, config.models, config.K, config.lenience, fill=fill
            )
            priced[key] = mixture_speedup(by, w)
        return priced[key]

    best = max((r.best for r in firsts.values()), key=price)
    pivot = max(sets, key=lambda n: w[n] / best_own[n])
    rows, certified = _FIRST_ROWS, False
    while True:
        result = top(pivot, rows)
        for config in result.table:
            if price(config) > price(best):
                best = config
        slack = 1.0 / price(best) - sum(w[d] / best_own[d] for d in sets if d != pivot)
        cut = w[pivot] / slack if slack > 0 else math.inf
        if len(result.table) < rows or result.table[-1].ewif < cut:
            certified = True
            break
        if rows >= max_rows:
            break
        rows *= 4
    prediction = mix_prediction(model_set, mix, best.models, best.K, best.lenience, fill=fill)
    return MixRecommendation(
        mix,
        replace(best, ewif=prediction.speedup),
        prediction,
        len(priced),
        certified,
        result.n_configurations,
        time.perf_counter() - started,
    )


def alpha_by_category_table(model_set: ModelSet, weights: Mapping[str, float] | None = None) -> str:
    """Per category: prompts, positions, (its weight in a mix,) and the target's acceptance of
    each drafter at lenience 1 — the report's "α per category"."""
    cats = model_set.categories
    if cats is None:
        return ""
    drafters = model_set.models[1:]
    headers = ["category", "prompts", "positions", *(["weight"] if weights else [])]
    headers += [f"α {model_set.models[0]}<-{d}" for d in drafters]
    rows = []
    for name in cats.names:
        cat = cats[name]
        alpha = cat.alpha[min(cat.alpha)]
        share = [f"{100 * weights.get(name, 0.0):.0f}%"] if weights else []
        values = ["-" if math.isnan(a) else f"{a:.3f}" for a in alpha[0, 1:]]
        rows.append([name, cat.n_prompts, cat.positions, *share, *values])
    pooled = model_set.alpha[min(model_set.alpha)][0, 1:]
    rows.append(
        [
            "all (pooled)",
            sum(cats[n].n_prompts for n in cats.names),
            sum(cats[n].positions for n in cats.names),
        ]
        + (["-"] if weights else [])
        + ["-" if math.isnan(a) else f"{a:.3f}" for a in pooled]
    )
    return table(headers, rows)
