"""A workload's mix of categories: Theorem MX and Corollary MX.1, the certified search for the
best configuration on a mix (against brute force), the stratified interval, bad mixes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files.bootstrap_data import BootstrapData
from ewif.files.categories import CategoryAcceptance, Mix, alpha_from_rows, parse_mix
from ewif.files.categories import category_set as category_of
from ewif.files.model_set import ModelSet
from ewif.kernel.cascade import Cascade
from ewif.kernel.mixture import mixture_speedup
from ewif.predict.mix import mix_intervals
from ewif.search.mix import (
    alpha_by_category_table,
    category_speedups,
    mix_prediction,
    recommend_mix,
)
from ewif.search.recommendation import recommend

KEYS = [(1.0, 0, 1), (1.0, 0, 2), (1.0, 1, 2), (3.0, 1, 2)]


def category_set(alphas: dict[str, dict], prompts: int = 3, seed: int = 0, catch_up=None):
    """A target + neural drafter + free proposer set whose categories have the given mean
    acceptances per pair (``alphas[c][key]``), ``prompts`` prompts each, varying around it."""
    rng = np.random.default_rng(seed)
    kinds, rows = [], {k: [] for k in KEYS}
    for name, means in alphas.items():
        for _ in range(prompts):
            kinds.append(name)
            for key in KEYS:
                n = 40.0
                a = min(max(means[key] + rng.normal(0, 0.05), 0.0), 1.0)
                rows[key].append([round(a * n), n])
    table = {k: np.array(v) for k, v in rows.items()}
    alpha = alpha_from_rows(table, 3, (1.0, 3.0))
    curves = (np.array([1.0, 1.05, 1.1, 1.2]), np.array([0.12, 0.13, 0.14]), np.array([0.01]))
    return ModelSet(
        models=("t", "d", "mag"),
        cost=np.array([c[0] for c in curves]),
        cost_per_token=np.zeros(3),
        alpha=alpha,
        cost_curve=curves,
        catch_up=catch_up,
        bootstrap=BootstrapData(table, tuple(np.full(c.size, 0.01 * c[0]) for c in curves)),
        categories=CategoryAcceptance.from_prompts(kinds, table, 3, alpha.keys()),
    )


def means(t_d: float, t_mag: float, d_mag: float) -> dict:
    return {
        (1.0, 0, 1): t_d,
        (1.0, 0, 2): t_mag,
        (1.0, 1, 2): d_mag,
        (3.0, 1, 2): min(1.0, d_mag + 0.15),
    }


SETS = {
    "code": means(0.9, 0.6, 0.65),
    "writing": means(0.6, 0.1, 0.15),
    "rag": means(0.8, 0.75, 0.8),
}


# -- Theorem MX -------------------------------------------------------------------------------


def test_mixture_is_the_weighted_harmonic_mean_and_a_mix_of_one_is_that_category():
    assert mixture_speedup({"a": 2.0, "b": 1.0}, {"a": 0.5, "b": 0.5}) == pytest.approx(4 / 3)
    assert mixture_speedup({"a": 2.0}, {"a": 1.0, "b": 0.0}) == 2.0
    with pytest.raises(ValueError, match="category 'b' needs a finite speed-up > 0"):
        mixture_speedup({"a": 2.0}, {"a": 0.5, "b": 0.5})


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.0, 0.99), min_size=2, max_size=4),
    st.lists(st.floats(0.01, 1.0), min_size=4, max_size=4),
    st.integers(1, 8),
    st.floats(0.0, 0.3),
)
def test_corollary_mx1_pooling_alpha_overestimates_at_a_fixed_step_cost(alphas, raw, k, c1):
    """Plain SD, k draft tokens of a drafter without catch-up: S_mix <= S(Σ w α), equality
    when every α is the same."""
    w = np.array(raw[: len(alphas)]) / sum(raw[: len(alphas)])

    def s(a: float) -> float:
        return Cascade([[np.nan, a], [np.nan, np.nan]], [1.0, c1], [[k]]).ewif()

    mixed = mixture_speedup(
        {str(i): s(a) for i, a in enumerate(alphas)}, {str(i): x for i, x in enumerate(w)}
    )
    assert mixed <= s(float(np.dot(w, alphas))) * (1 + 1e-12)
    same = {str(i): s(alphas[0]) for i in range(len(alphas))}
    assert mixture_speedup(same, {str(i): x for i, x in enumerate(w)}) == pytest.approx(
        s(alphas[0]), rel=1e-12
    )


@pytest.mark.parametrize("k", range(1, 13))
def test_the_convexity_polynomial_of_corollary_mx1_has_the_coefficients_the_proof_says(k):
    a = sp.symbols("a")
    g = sum(a**i for i in range(k + 1))
    coefficients = sp.Poly(
        sp.expand(a**2 * (2 * sp.diff(g, a) ** 2 - g * sp.diff(g, a, 2))), a
    ).all_coeffs()[::-1]
    assert all(c == 0 for c in coefficients[: k + 1])  # n <= k: every d present, sum 0
    assert coefficients[k + 1] > 0 and all(c >= 0 for c in coefficients)
    for n, c in enumerate(coefficients):  # a_n = Σ_{i+j=n} (n² + 2n − 3(i−j)²)/4
        pairs = [(i, n - i) for i in range(k + 1) if 0 <= n - i <= k]
        assert c == sp.Rational(sum(n * n + 2 * n - 3 * (i - j) ** 2 for i, j in pairs), 4)


def test_a_mix_is_not_the_ewif_at_the_mixed_alpha():
    ms = category_set(SETS)
    mix = parse_mix("writing=0.5,rag=0.5")
    pred = mix_prediction(ms, mix, ("t", "mag"), [[6]], 1.0)
    by = pred.by_category
    assert pred.speedup == pytest.approx(1 / (0.5 / by["writing"] + 0.5 / by["rag"]))
    assert pred.pooled > pred.speedup * 1.03  # the pooled α is optimistic here (MX.1)


# -- the search -------------------------------------------------------------------------------


def brute_force(ms: ModelSet, mix: Mix, k_max: int) -> float:
    """The best S_mix over every upper-triangular K with entries 0..k_max and every
    lenience, by pricing each configuration."""
    best = -math.inf
    for entries in itertools.product(range(k_max + 1), repeat=3):
        K = np.array([[entries[0], entries[1]], [0, entries[2]]])
        if not K[0].any():
            continue
        for lenience in ms.leniences:
            try:
                by = category_speedups(ms, mix, ms.models, K, lenience)
            except ValueError:
                continue
            best = max(best, mixture_speedup(by, mix.weights))
    return best


@pytest.mark.parametrize(
    ("text", "catch_up"),
    [
        ("code=0.5,writing=0.3,rag=0.2", None),
        ("writing=0.9,rag=0.1", None),
        ("code=0.2,writing=0.2,rag=0.6", (False, True, False)),
    ],
)
def test_the_mix_search_finds_the_brute_force_optimum_and_proves_it(text, catch_up):
    ms = category_set(SETS, catch_up=catch_up)
    mix = parse_mix(text)
    rec = recommend_mix(ms, mix, space="full", k_max=4)
    assert rec.certified
    assert rec.best.ewif == pytest.approx(brute_force(ms, mix, 4), rel=1e-9)
    again = mix_prediction(ms, mix, rec.best.models, rec.best.K, rec.best.lenience)
    assert rec.best.ewif == pytest.approx(again.speedup, rel=1e-12)


def test_a_mix_of_one_category_recommends_what_that_category_alone_does():
    ms = category_set(SETS)
    rec = recommend_mix(ms, parse_mix("rag=1"), space="full", k_max=4)
    alone = recommend(category_of(ms, "rag"), space="full", k_max=4)
    assert rec.best.ewif == pytest.approx(alone.ewif, rel=1e-9)


def test_the_table_shows_alpha_per_category_and_the_pooled_row():
    text = alpha_by_category_table(category_set(SETS), {"rag": 1.0})
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["category", "prompts", "positions", "weight"]
    assert [line.split()[0] for line in lines[2:]] == ["code", "writing", "rag", "all"]
    assert "100%" in lines[4] and "α t<-d" in lines[0]


# -- the interval -----------------------------------------------------------------------------


def test_the_mix_interval_holds_its_point_and_is_seeded():
    ms = category_set(SETS)
    mix = parse_mix("code=0.5,writing=0.5")
    configs = [(("t", "d"), [[3]], 1.0), (("t", "d", "mag"), [[2, 4], [0, 3]], 3.0)]
    first = mix_intervals(ms, mix, configs, replicates=60, seed=3)
    assert first == mix_intervals(ms, mix, configs, replicates=60, seed=3)
    for (models, K, lenience), interval in zip(configs, first, strict=True):
        assert interval.point == pytest.approx(
            mix_prediction(ms, mix, models, K, lenience).speedup, rel=1e-12
        )
        assert interval.low < interval.point < interval.high


def test_resampling_within_categories_leaves_no_spread_when_each_category_is_uniform():
    """Every prompt of a category the same, categories very different: a bootstrap within
    categories has nothing to resample (the interval is the point); one over all prompts
    would trade writing prompts for rag prompts."""
    ms = category_set(SETS, prompts=4)
    rows = {}
    for key, table in ms.bootstrap.acceptance_by_prompt.items():
        fixed = table.copy()
        for c in range(3):  # each category's first prompt, four times
            fixed[4 * c : 4 * c + 4] = table[4 * c]
        rows[key] = fixed
    kinds = [c for c in SETS for _ in range(4)]
    alpha = alpha_from_rows(rows, 3, (1.0, 3.0))
    uniform = ModelSet(
        models=ms.models,
        cost=ms.cost,
        cost_per_token=ms.cost_per_token,
        alpha=alpha,
        cost_curve=ms.cost_curve,
        categories=CategoryAcceptance.from_prompts(kinds, rows, 3, alpha.keys()),
    )
    (interval,) = mix_intervals(uniform, parse_mix("writing=1,rag=1"), [(("t", "d"), [[3]], 1.0)])
    assert interval.low == pytest.approx(interval.point) == pytest.approx(interval.high)


def test_an_interval_needs_two_prompts_of_every_weighed_category():
    ms = category_set(SETS, prompts=1)
    with pytest.raises(ValueError, match="category 'code' was measured on 1 prompt"):
        mix_intervals(ms, parse_mix("code=1"), [(("t", "d"), [[3]], 1.0)])


# -- bad mixes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("code", "the mix must be NAME=WEIGHT,"),
        ("code=0.5,", "the mix must be NAME=WEIGHT,"),
        ("=0.5", "the mix must be NAME=WEIGHT,"),
        ("code=half", "the weight of 'code' in the mix must be a number, got 'half'"),
        ("code=-0.5,rag=1", r"the weight of 'code' in the mix must be a finite number >= 0"),
        ("code=inf", r"must be a finite number >= 0, got inf"),
        ("code=nan", r"must be a finite number >= 0, got nan"),
        ("code=0,rag=0", "the mix's weights are all zero"),
        ("code=1,code=2", "the mix gives 'code' twice"),
        ("co de=1", "the mix names 'co de': a category name is"),
    ],
)
def test_bad_mixes_are_one_line_errors(text, message):
    with pytest.raises(ValueError, match=message) as info:
        parse_mix(text)
    assert "\n" not in str(info.value)


def test_a_mix_names_only_measured_categories():
    ms = category_set(SETS)
    with pytest.raises(
        ValueError, match="unknown category 'poetry' in the mix; the model set measured: code"
    ):
        parse_mix("poetry=1,code=1").checked(ms.categories)
    with pytest.raises(ValueError, match="no α per category"):
        parse_mix("code=1").checked(None)


def test_weights_are_shares_normalised_to_one():
    mix = parse_mix("writing=5, code=3 ,rag=2,qa=0")
    assert mix.weights == pytest.approx({"writing": 0.5, "code": 0.3, "rag": 0.2, "qa": 0.0})
    assert mix.used == ("writing", "code", "rag")
    assert mix.describe() == "writing 50%, code 30%, rag 20%, qa 0%"
    with pytest.raises(ValueError, match="finite number >= 0, got True"):
        Mix({"a": True})
