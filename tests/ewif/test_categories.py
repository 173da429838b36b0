"""α per task category in the model set (``alpha_by_category``, csd.models/6): round trip
through the file, old files still read, every malformed section refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ewif.files import model_set as model_io
from ewif.files.bootstrap_data import BootstrapData
from ewif.files.categories import (
    Category,
    CategoryAcceptance,
    alpha_from_rows,
)
from ewif.files.model_set import ModelSet

KEYS = [(1.0, 0, 1), (1.0, 0, 2), (1.0, 1, 2), (2.0, 1, 2)]
KINDS = ["rag", "code", "rag", "writing", "code"]


def rows_of(seed: int, prompts: int = len(KINDS)) -> dict:
    """Per pair, one ``[s, n]`` row per prompt: ``n`` positions, ``s`` accepted."""
    rng = np.random.default_rng(seed)
    out = {}
    for key in KEYS:
        n = rng.integers(1, 40, prompts).astype(float)
        out[key] = np.column_stack([np.floor(rng.random(prompts) * (n + 1)), n])
    return out


def measured_set(seed: int = 0, kinds=KINDS) -> ModelSet:
    """A three-model set measured on ``kinds`` prompts, with α per category."""
    rows = rows_of(seed, len(kinds))
    alpha = alpha_from_rows(rows, 3, (1.0, 2.0))
    return ModelSet(
        models=("target", "d1", "d2"),
        cost=np.array([1.0, 0.3, 0.1]),
        cost_per_token=np.zeros(3),
        alpha=alpha,
        bootstrap=BootstrapData(rows),
        categories=CategoryAcceptance.from_prompts(
            kinds, rows, 3, alpha.keys(), [f"{k}-{i}" for i, k in enumerate(kinds)]
        ),
    )


def test_alpha_per_category_round_trips_through_the_file(tmp_path):
    ms = measured_set()
    back = model_io.load(model_io.save(ms, tmp_path / "m.json"))
    assert back.categories.names == ("rag", "code", "writing")
    for name in back.categories.names:
        got, want = back.categories[name], ms.categories[name]
        assert got.prompts == want.prompts
        assert sorted(got.alpha) == [1.0, 2.0]
        for lenience in got.alpha:
            np.testing.assert_array_equal(got.alpha[lenience], want.alpha[lenience])
        for key in KEYS:
            np.testing.assert_array_equal(
                got.acceptance_by_prompt[key], want.acceptance_by_prompt[key]
            )
    assert back.to_dict() == ms.to_dict()
    assert json.loads((tmp_path / "m.json").read_text())["schema"] == "csd.models/6"
    yaml_back = model_io.load(model_io.save(ms, tmp_path / "m.yaml"))
    assert yaml_back.to_dict() == ms.to_dict()


def test_each_category_alpha_is_its_own_prompts_acceptance():
    ms = measured_set(3)
    rows = ms.bootstrap.acceptance_by_prompt
    rag = [i for i, k in enumerate(KINDS) if k == "rag"]
    s, n = rows[(2.0, 1, 2)][rag].sum(axis=0)
    assert ms.categories["rag"].alpha[2.0][1, 2] == pytest.approx(s / n)
    s, n = rows[(1.0, 0, 1)][rag].sum(axis=0)
    for lenience in (1.0, 2.0):  # the target row, measured at l = 1, at every lenience
        assert ms.categories["rag"].alpha[lenience][0, 1] == pytest.approx(s / n)
    assert ms.categories["writing"].n_prompts == 1
    assert ms.categories["rag"].positions == int(rows[(1.0, 0, 1)][rag, 1].sum())


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.sampled_from("abc"), min_size=2, max_size=12))
def test_categories_pool_back_to_the_sets_alpha(seed, kinds):
    """Σ over categories of Σ s / Σ over categories of Σ n is the pooled α: position-weighted."""
    ms = measured_set(seed, kinds)
    for lenience, r, j in KEYS:
        num = sum(
            ms.categories[c].alpha[lenience][r, j]
            * ms.categories[c].acceptance_by_prompt[(lenience, r, j)][:, 1].sum()
            for c in ms.categories.names
        )
        den = sum(
            ms.categories[c].acceptance_by_prompt[(lenience, r, j)][:, 1].sum()
            for c in ms.categories.names
        )
        assert num / den == pytest.approx(ms.alpha[lenience][r, j], abs=1e-12)


def test_older_files_still_read_and_a_category_section_needs_schema_6(tmp_path):
    data = measured_set().to_dict()
    old = {k: v for k, v in data.items() if k != "alpha_by_category"} | {"schema": "csd.models/5"}
    assert ModelSet.from_dict(old).categories is None
    with pytest.raises(ValueError, match=r"alpha_by_category needs schema 'csd.models/6'"):
        ModelSet.from_dict({**old, "alpha_by_category": data["alpha_by_category"]})


def _with(section) -> dict:
    data = measured_set().to_dict()
    data["alpha_by_category"] = section
    return data


def _rag() -> dict:
    return measured_set().to_dict()["alpha_by_category"]["rag"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ([1, 2], "alpha_by_category must be a mapping category -> its acceptance"),
        ({}, "at least one category"),
        ({"a b": _rag()}, "a category name is letters"),
        ({"rag": {"alpha": {}}}, "must be a mapping with 'alpha' and 'acceptance_by_prompt'"),
        ({"rag": {**_rag(), "extra": 1}}, r"unknown keys \['extra'\]"),
        ({"rag": {**_rag(), "prompts": ["x"]}}, "prompts names 1 prompts"),
        ({"rag": {**_rag(), "alpha": {"x": []}}}, "alpha key 'x' must be a lenience"),
        (
            {"rag": {**_rag(), "acceptance_by_prompt": {"1,0": [[1, 2]]}}},
            "key '1,0' must be 'l,r,j'",
        ),
        (
            {"rag": {**_rag(), "acceptance_by_prompt": {"1,0,1": [[3, 2], [1, 2]]}}},
            "needs 0 <= sum <= count",
        ),
        (
            {"rag": {**_rag(), "acceptance_by_prompt": {"1,0,1": "many"}}},
            "must be a list of .sum, count. pairs",
        ),
        (
            {"rag": {**_rag(), "alpha": {"1": _rag()["alpha"]["1"]}}},
            "key '2,1,2' must name a lenience of alpha",
        ),
        (
            {
                "rag": {
                    "alpha": {"1": [[None, 0.5], [None, None]], "2": [[None, 0.5], [None, None]]},
                    "acceptance_by_prompt": {"1,0,1": [[1, 2]]},
                }
            },
            r"must give 3x3 matrices at the set's leniences \['1', '2'\]",
        ),
    ],
)
def test_malformed_sections_are_one_line_errors(section, message):
    with pytest.raises(ValueError, match=message) as info:
        ModelSet.from_dict(_with(section), "m.json")
    assert "\n" not in str(info.value) and str(info.value).startswith("m.json: ")


def test_an_alpha_that_is_not_its_prompts_acceptance_is_refused():
    rag = _rag()
    rag["alpha"]["2"][1][2] = 0.123456
    with pytest.raises(ValueError, match=r"alpha\[2\]\[1\]\[2\] = 0.123456 is not the acceptance"):
        ModelSet.from_dict(_with({"rag": rag}))


def test_unknown_category_names_the_measured_ones():
    with pytest.raises(ValueError, match="unknown category 'poetry'; measured: rag, code, writing"):
        measured_set().categories["poetry"]


def test_from_prompts_needs_one_category_per_prompt():
    rows = rows_of(0)
    with pytest.raises(ValueError, match=r"one category .and id. per measured prompt"):
        CategoryAcceptance.from_prompts(["a"], rows, 3, (1.0, 2.0))
    assert isinstance(CategoryAcceptance.from_prompts(KINDS, rows, 3, (1.0, 2.0))["rag"], Category)
