"""The optimizer under pass-cost curves, and what its ranked table means — both against brute
force with the ``Cascade`` evaluator (independent canonical forms, merging and tie rule)."""

from __future__ import annotations

import dataclasses
import itertools
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files.model_set import ModelSet
from ewif.files.presets import load_preset
from ewif.search.optimizer import optimize
from ewif.search.space import paper_bounds

NAN = np.nan


def canonical(K: np.ndarray) -> list[int]:
    """Models a configuration reaches (0 first): drafters with a budget from a reached
    reviewer; a reached drafter reviews when its own row is non-zero."""
    n = K.shape[0]
    used, reviewers = [0], [0]
    while reviewers:
        r = reviewers.pop()
        for j in range(r + 1, n + 1):
            if K[r, j - 1] > 0 and j not in used:
                used.append(j)
                if j < n and K[j].any():
                    reviewers.append(j)
    return sorted(used)


def brute_table(ms: ModelSet, models, Ks, fill="tokens"):
    """Every configuration, canonicalised, merged (lenience dropped when no drafter reviews),
    evaluated by Cascade and ranked: EWIF desc, ΣK, K, lenience, model positions."""
    seen = {}
    for lenience in ms.leniences:
        for K in Ks:
            K = np.asarray(K)
            if not K[0].any():
                continue
            keep = canonical(K)
            names = tuple(models[i] for i in keep)
            Kc = K[np.ix_(keep[:-1], [i - 1 for i in keep[1:]])]
            key = (names, Kc.tobytes(), lenience if Kc[1:].any() else None)
            if key in seen:
                continue
            e = ms.to_cascade(names, Kc, lenience, fill=fill).ewif()
            seen[key] = (e, names, Kc, lenience)
    rows = sorted(
        seen.values(),
        key=lambda t: (-t[0], int(t[2].sum()), t[2].tolist(), t[3], [ms.index(m) for m in t[1]]),
    )
    return rows


def full_Ks(n: int, lo: int, hi: int):
    cells = [(r, c) for r in range(n) for c in range(r, n)]
    for ks in itertools.product(range(lo, hi + 1), repeat=len(cells)):
        K = np.zeros((n, n), dtype=int)
        for (r, c), k in zip(cells, ks, strict=True):
            K[r, c] = k
        yield K


def same_table(got, expect):
    assert [(c.models, c.K.tolist(), c.lenience, c.ewif) for c in got] == [
        (names, K.tolist(), lenience, e) for e, names, K, lenience in expect
    ]


alphas = st.sampled_from([0.3, 0.55, 0.8, 1.0])
target_curve = st.lists(st.sampled_from([1.97, 1.79, 2.07, 1.2, 3.0]), min_size=1, max_size=4)
drafter_curve = st.lists(st.sampled_from([0.0, 0.02, 0.05, 0.1, 0.08]), min_size=1, max_size=4)


@settings(max_examples=25)
@given(
    st.lists(alphas, min_size=3, max_size=3),
    st.lists(alphas, min_size=1, max_size=1),
    target_curve,
    st.lists(drafter_curve, min_size=2, max_size=2),
    st.sampled_from(["tokens", "rounds"]),
)
def test_curves_exhaustive_equals_brute_force_table(a, a3, tail, drafters, fill):
    a1 = np.full((3, 3), NAN)
    a1[0, 1:], a1[1, 2] = a[:2], a[2]
    a3m = a1.copy()
    a3m[1, 2] = a3[0]
    curves = [[1.0, *tail], *drafters]
    ms = ModelSet(
        models=("t", "d1", "d2"),
        cost=np.array([c[0] for c in curves]),
        cost_per_token=np.zeros(3),
        alpha={1.0: a1, 3.0: a3m},
        cost_curve=tuple(np.array(c) for c in curves),
    )
    expect = brute_table(ms, ms.models, list(full_Ks(2, 0, 3)), fill)
    got = optimize(ms, bounds=(0, 3), subsets=False, fill=fill, top=6)
    assert got.method == ("exhaustive" if not ms.pass_cost.is_affine(0) else got.method)
    same_table(got.table, expect[:6])


def test_paper_space_with_curves_is_the_true_optimum():
    ms = load_preset("flan-t5-ms")
    curves = ([1.0, 1.97, 1.79, 2.07], [ms.cost[1], ms.cost[1] * 1.3], [ms.cost[2]], [0.0])
    cs = dataclasses.replace(ms, cost_curve=tuple(np.array(c) for c in curves))
    Ks = [
        np.array([[k11, k12, 10], [0, k22, 10], [0, 0, 10]])
        for k11, k12, k22 in itertools.product(range(1, 5), repeat=3)
    ]
    expect = brute_table(cs, cs.models, Ks)
    got = optimize(cs, bounds=paper_bounds(4), subsets=False, top=5)
    assert got.method == "exhaustive"
    same_table(got.table, expect[:5])


def test_dinkelbach_is_exact_with_drafter_curves_and_refuses_a_target_curve():
    ms = load_preset("flan-t5-ms")
    drafter_curves = (
        [1.0, 1.05, 1.1],
        [ms.cost[1], ms.cost[1] * 0.8, ms.cost[1] * 1.4],
        [ms.cost[2], ms.cost[2] * 2],
        [0.0],
    )  # target affine, drafters not
    cs = dataclasses.replace(ms, cost_curve=tuple(np.array(c) for c in drafter_curves))
    assert cs.pass_cost.is_affine(0)
    dk = optimize(cs, bounds=paper_bounds(6), subsets=False, method="dinkelbach")
    ex = optimize(cs, bounds=paper_bounds(6), subsets=False, method="exhaustive")
    assert dk.best.ewif == pytest.approx(ex.best.ewif, rel=1e-12)
    bent = dataclasses.replace(cs, cost_curve=(np.array([1.0, 1.97, 1.79]), *cs.cost_curve[1:]))
    with pytest.raises(ValueError, match="not separable"):
        optimize(bent, bounds=paper_bounds(3), subsets=False, method="dinkelbach")


def test_auto_picks_exhaustive_for_a_target_curve(monkeypatch):
    # every space counts as "large"
    monkeypatch.setattr(sys.modules["ewif.search.optimizer"], "_EXHAUSTIVE_LIMIT", 0)
    ms = load_preset("flan-t5-ms")
    assert optimize(ms, bounds=paper_bounds(3), subsets=False).method == "dinkelbach"
    bent = dataclasses.replace(
        ms, cost_curve=(np.array([1.0, 1.97, 1.79]), *(np.array([c]) for c in ms.cost[1:]))
    )
    assert optimize(bent, bounds=paper_bounds(3), subsets=False).method == "exhaustive"


def tie_set(target_curve=None) -> ModelSet:
    """alpha = 1 and free drafters: every configuration with the same draft ties."""
    a = np.full((3, 3), NAN)
    a[0, 1:], a[1, 2] = [1.0, 1.0], 1.0
    b = a.copy()
    b[1, 2] = 0.5
    curves = None if target_curve is None else (np.array(target_curve), np.zeros(1), np.zeros(1))
    return ModelSet(
        models=("t", "d1", "d2"),
        cost=np.array([1.0, 0.0, 0.0]),
        cost_per_token=np.array([0.0, 0.0, 0.0]),
        alpha={1.0: a, 3.0: b},
        cost_curve=curves,
    )


@pytest.mark.parametrize("target_curve", [None, [1.0, 1.0, 1.5, 1.5]])
def test_exhaustive_table_with_ties_is_the_brute_force_ranking(target_curve):
    ms = tie_set(target_curve)
    expect = brute_table(ms, ms.models, list(full_Ks(2, 0, 2)))
    got = optimize(ms, bounds=(0, 2), subsets=False, method="exhaustive", top=12)
    assert len({e for e, *_ in expect[:12]}) < 12  # the case has ties
    same_table(got.table, expect[:12])


def test_dinkelbach_table_is_the_best_of_each_sub_space():
    ms = tie_set()
    ms = dataclasses.replace(
        ms,
        alpha={k: np.where(v == 1.0, 0.7, v) for k, v in ms.alpha.items()},
        cost=np.array([1.0, 0.05, 0.01]),
    )
    got = optimize(ms, bounds=(1, 2), subsets=True, method="dinkelbach", top=10)
    expect = []  # best of each (drafter subset × lenience), merged as in the table
    for sub in (("t", "d1"), ("t", "d2"), ("t", "d1", "d2")):
        n = len(sub) - 1
        for lenience in ms.leniences:
            one = dataclasses.replace(ms, alpha={lenience: ms.alpha[lenience]})
            expect.append(brute_table(one, sub, list(full_Ks(n, 1, 2)))[0])
    merged = {}
    for e, names, K, lenience in expect:
        key = (names, K.tobytes(), lenience if K[1:].any() else None)
        merged.setdefault(key, e)
    assert sorted(c.ewif for c in got.table) == pytest.approx(sorted(merged.values()), rel=1e-12)
    ewifs = [c.ewif for c in got.table]
    assert ewifs == sorted(ewifs, reverse=True)
