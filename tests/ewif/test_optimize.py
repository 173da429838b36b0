"""The optimizer finds the true optimum: checked against brute force with the Cascade evaluator."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from ewif import best_k
from ewif.files.presets import load_preset
from ewif.search.landscape import landscape_around
from ewif.search.optimizer import as_model_set, best_sd, optimize
from ewif.search.space import paper_bounds

NAN = np.nan


def toy_set():
    a1 = np.full((4, 4), NAN)
    a1[0, 1:] = [0.8, 0.7, 0.45]
    a1[1, 2:] = [0.8, 0.55]
    a1[2, 3] = 0.6
    a3 = a1.copy()
    a3[1, 2:] = [0.9, 0.7]
    a3[2, 3] = 0.75
    return as_model_set(
        {1.0: a1, 3.0: a3},
        cost=[1, 0.05, 0.012, 0.002],
        cost_per_token=[0.001, 0, 0, 0],
        names=["t", "b", "s", "m"],
    )


def brute(ms, K_iter, fill):
    best = (-1.0, None)
    for lenience in ms.leniences:
        for K in K_iter():
            try:
                e = ms.to_cascade(ms.models, K, lenience, fill=fill).ewif()
            except ValueError:
                continue  # unused drafter or empty target row
            if e > best[0]:
                best = (e, (K.tolist(), lenience))
    return best


@functools.cache
def brute_full(bound, fill):
    return brute(toy_set(), full_space(bound), fill)


def full_space(bound):
    def it():
        for ks in itertools.product(range(bound + 1), repeat=6):
            K = np.zeros((3, 3), dtype=int)
            K[0], K[1, 1:], K[2, 2] = ks[:3], ks[3:5], ks[5]
            yield K

    return it


@pytest.mark.parametrize("fill", ["tokens", "rounds"])
@pytest.mark.parametrize("method", ["exhaustive", "dinkelbach"])
def test_full_upper_triangular_space_equals_brute_force(fill, method):
    ms = toy_set()
    expect, where = brute_full(2, fill)
    got = optimize(ms, bounds=(0, 2), subsets=False, method=method, fill=fill)
    assert got.best.ewif == pytest.approx(expect, rel=1e-12), (got.best, where)
    # the winner re-evaluates to the same number with an independent Cascade
    assert got.cascade().ewif() == pytest.approx(got.best.ewif, rel=1e-15)


def test_paper_space_true_optimum_small_bounds():
    ms = load_preset("flan-t5-ms")

    def it():
        for k11, k12, k22 in itertools.product(range(1, 7), repeat=3):
            yield np.array([[k11, k12, 10], [0, k22, 10], [0, 0, 10]])

    expect, _ = brute(ms, it, "tokens")
    got = optimize(ms, bounds=paper_bounds(6), subsets=False, method="exhaustive")
    assert got.best.ewif == pytest.approx(expect, rel=1e-12)
    assert got.n_configurations == 6**3 * 3


def test_paper_space_full_bounds_two_strategies_agree_and_table_is_exact():
    ms = load_preset("flan-t5-ms")
    ex = optimize(ms, bounds=paper_bounds(), subsets=False, method="exhaustive", top=8)
    dk = optimize(ms, bounds=paper_bounds(), subsets=False, method="dinkelbach")
    assert ex.n_configurations == 27_000 * 3
    assert dk.best.ewif == pytest.approx(ex.best.ewif, rel=1e-12)
    ewifs = [c.ewif for c in ex.table]
    assert ewifs == sorted(ewifs, reverse=True) and len(ex.table) == 8
    for c in ex.table:  # every row is an exact Cascade evaluation of its configuration
        assert ms.to_cascade(c.models, c.K, c.lenience).ewif() == c.ewif


def test_subsets_and_missing_alphas():
    ms = toy_set()
    got = optimize(ms, bounds=(1, 2), subsets=True, method="exhaustive")
    best = -1.0
    for size in (1, 2, 3):
        for sub in itertools.combinations(["b", "s", "m"], size):
            models = ("t", *sub)
            n = len(sub)
            for ks in itertools.product(range(1, 3), repeat=n * (n + 1) // 2):
                K = np.zeros((n, n), dtype=int)
                K[np.triu_indices(n)] = ks
                for lenience in ms.leniences:
                    best = max(best, ms.to_cascade(models, K, lenience).ewif())
    assert got.best.ewif == pytest.approx(best, rel=1e-12)
    # T5 presets have no drafter-vs-drafter alphas: only target-reviewed blocks are searched
    t5 = load_preset("t5-cnndm-ms")
    r = optimize(t5, bounds=(0, 12), subsets=False)
    assert not r.best.K[1:].any()


def test_best_sd_matches_best_k():
    ms = load_preset("flan-t5-ms")
    sd = best_sd(ms, drafters=["flan-t5-base", "flan-t5-small"])
    k, e = max(
        (best_k(float(ms.alpha[1.0][0, j]), float(ms.cost[j])) for j in (1, 2)), key=lambda t: t[1]
    )
    assert (int(sd.K[0, 0]), sd.ewif) == (k, pytest.approx(e, rel=1e-12))


def test_landscape_grid_is_exact():
    ms = load_preset("flan-t5-ms")
    r = optimize(ms, bounds=paper_bounds(10), subsets=False)
    land = landscape_around(r, k_max=10)
    (r1, j1), (r2, j2) = land.entries
    i, j = 3, 6
    K = r.best.K.copy()
    K[r1 - 1, j1 - 1], K[r2 - 1, j2 - 1] = land.x[i], land.y[j]
    expect = ms.to_cascade(r.best.models, K, r.best.lenience).ewif()
    assert land.grid[i, j] == expect
    assert np.nanmax(land.grid) >= r.best.ewif - 1e-12


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"leniences": [2]}, "lenience 2"),
        ({"candidates": ["b", "t"]}, "candidates"),
        ({"bounds": (3, 1)}, "lo <= hi"),
        ({"bounds": {(2, 1): 3}, "subsets": False}, "outside the upper triangle"),
        ({"bounds": {(1, 1): 3}, "subsets": True}, "subsets=True"),
        ({"method": "greedy"}, "method"),
        ({"fill": "x"}, "fill"),
        ({"bounds": (0, 0)}, "no valid configuration"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        optimize(toy_set(), **kwargs)


def test_bound_specs_read_alike_by_the_search_and_its_size_check():
    """One reader of bound specs (ewif.search.space.bound_values): a tuple is an inclusive range, a
    list its values, for optimize and for space_size alike."""
    from ewif.search.space import bound_values, space_size

    assert bound_values("b", (2, 4)) == (2, 3, 4)
    assert bound_values("b", [4, 2]) == (2, 4)
    assert bound_values("b", 3) == (3,)
    for spec, match in [((4, 2), "lo <= hi"), ([], "at least one"), ([1, -1], ">= 0")]:
        with pytest.raises(ValueError, match=match):
            bound_values("b", spec)
    ms = toy_set()
    bounds = {(1, 1): [1, 5], (1, 2): (0, 2)}
    r = optimize(ms, bounds=bounds, leniences=[1.0], subsets=False, method="exhaustive")
    size = space_size(ms.alpha, 4, bounds, [1.0], hint="")
    assert r.n_configurations == size == 2 * 3
    assert int(r.best.K[0, 0]) in (1, 5)
