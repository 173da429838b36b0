"""The model set's rank-acceptance vectors (``csd.models/6``) and tree section: written and
read back, older files read as chains, malformed sections refused with one line; the
Sequoia preset is labelled."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ewif.files import model_set as model_io
from ewif.files.presets import load_preset
from ewif.files.tree_config import TreeConfig
from ewif.files.tree_models import load_tree, rank_vector, tree_cascade
from ewif.kernel.tree import Tree
from ewif.kernel.tree_cascade import TreeCascade

QWEN = Path(__file__).resolve().parents[2] / "realrun" / "data" / "models_qwen.json"


def _data(**extra) -> dict:
    return {
        "schema": "csd.models/6",
        "models": ["t", "d", "mag"],
        "cost": [1.0, 0.1, 0.0],
        "alpha": {
            "1": [[None, 0.7, 0.4], [None, None, 0.5], [None, None, None]],
            "3": [[None, 0.7, 0.4], [None, None, 0.6], [None, None, None]],
        },
        "rank_acceptance": {
            "vectors": {"1,0,1": [0.7, 0.1, 0.05], "3,0,1": [0.7, 0.1, 0.05], "3,1,2": [0.6, 0.2]},
            "by_prompt": {"3,1,2": [[[5.0, 2.0], 10], [[7.0, 1.5], 10]]},
        },
        **extra,
    }


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_round_trip(tmp_path, suffix) -> None:
    ms = model_io.ModelSet.from_dict(_data())
    back = model_io.load(model_io.save(ms, tmp_path / f"set{suffix}"))
    assert back.to_dict() == ms.to_dict() and back.to_dict()["schema"] == "csd.models/6"
    assert rank_vector(back, 3, 1, 2).tolist() == [0.6, 0.2]
    assert rank_vector(back, 1, 1, 2).tolist() == [0.5]  # no vector: a chain
    assert rank_vector(back, 3, 0, 1).tolist() == [0.7, 0.1, 0.05]
    assert back.rank_acceptance.by_prompt[(3.0, 1, 2)].tolist() == [[5, 2, 10], [7, 1.5, 10]]


def test_older_files_read_as_chains() -> None:
    ms = model_io.load(QWEN)
    assert ms.rank_acceptance is None
    assert rank_vector(ms, 3, 1, 2).tolist() == [ms.alpha[3.0][1, 2]]


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"schema": "csd.models/5"}, r"rank_acceptance needs schema 'csd.models/6'"),
        (
            {"rank_acceptance": {"vectors": {"1,0,1": [0.6, 0.1]}}},
            r"p_1 = alpha\[1\]\[0\]\[1\] = 0.7",
        ),
        ({"rank_acceptance": {"vectors": {"1,0,1": [0.7, 0.4]}}}, r"sum to at most 1"),
        ({"rank_acceptance": {"vectors": {"1,0,1": [0.7, -0.1]}}}, r"p_2 = -0.1"),
        ({"rank_acceptance": {"vectors": {"2,0,1": [0.7]}}}, r"lenience 2 has no alpha matrix"),
        ({"rank_acceptance": {"vectors": {"1,2,1": [0.7]}}}, r"must name a pair 0 <= r < j < 3"),
        (
            {"rank_acceptance": {"vectors": {"1,0,1": [0.7, 0.1], "3,0,1": [0.7, 0.2]}}},
            r"target's vectors must be the same at every lenience",
        ),
        ({"rank_acceptance": {"vectors": {"x": [0.7]}}}, r"key 'x' must be 'l,r,j'"),
        ({"rank_acceptance": [0.7]}, r"rank_acceptance must be a mapping with 'vectors'"),
        (
            {
                "rank_acceptance": {
                    "vectors": {"1,0,1": [0.7, 0.1]},
                    "by_prompt": {"1,0,1": [[[1], 5], [[1], 5]]},
                }
            },
            r"per prompt, \[\[sum_1, \.\.\., sum_2\], positions\]",
        ),
        (
            {
                "rank_acceptance": {
                    "vectors": {"1,0,1": [0.7]},
                    "by_prompt": {"1,0,1": [[[6], 5], [[1], 5]]},
                }
            },
            r"adding up to at most the positions",
        ),
    ],
)
def test_malformed_sections(change, match) -> None:
    with pytest.raises(ValueError, match=match):
        model_io.ModelSet.from_dict(_data(**change), source="f.json")


TREE = {
    "models": ["t", "d", "mag"],
    "K": [[2, 0], [0, 3]],
    "lenience": 3,
    "review": {"reviewer": "d", "drafter": "mag", "parents": [-1, 0, 0, 1]},
    "siblings": {"d": 2},
}


def test_the_tree_section_is_priced_as_the_kernel_prices_it(tmp_path) -> None:
    path = tmp_path / "set.json"
    data = _data(cost_curve=[[1.0, 1.1, 1.3, 1.4], [0.1, 0.12], [0.0]], tree=TREE)
    del data["cost"]
    path.write_text(json.dumps(data))
    ms, config = load_tree(path)
    assert config.describe() == (
        "t > d > mag  K=[[2, 0], [0, 3]]  l=3  tree: d reviews mag's 4 nodes (depth 2) "
        "[-1, 0, 0, 1]  siblings: d 2"
    )
    assert TreeConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()
    priced = tree_cascade(ms, config)
    direct = TreeCascade(
        ms.alpha[3.0],
        None,
        [[2, 0], [0, 3]],
        cost_curve=[list(c) for c in ms.cost_curve],
        rank={(1, 2): [0.6, 0.2], (0, 1): [0.7, 0.1, 0.05]},
        tree=(1, 2, Tree([-1, 0, 0, 1])),
        siblings=[0, 2, 0],
        proposers=[False, False, True],
    )
    assert priced.ewif() == direct.ewif() and priced.is_tree


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            {"review": {"reviewer": "d", "drafter": "mag", "parents": [0, 0]}},
            r"tree.review.parents\[0\] is the root",
        ),
        (
            {"review": {"reviewer": "x", "drafter": "mag", "parents": [-1, 0]}},
            r"tree.review.reviewer 'x' is not one of",
        ),
        ({"siblings": {"t": 1}}, r"tree.siblings names 't', not a drafter"),
        ({"siblings": {"d": -1}}, r"siblings\['d'\] must be an integer >= 0"),
        ({"lenience": 0.5}, r"tree.lenience must be a finite number >= 1"),
        ({"K": [[1, 0]]}, r"tree.K must have shape \(2, 2\)"),
        ({"extra": 1}, r"tree has unknown keys \['extra'\]"),
    ],
)
def test_malformed_tree_sections(tmp_path, change, match) -> None:
    path = tmp_path / "set.json"
    path.write_text(json.dumps(_data(tree={**TREE, **change})))
    with pytest.raises(ValueError, match=match):
        load_tree(path)


def test_the_sequoia_preset_is_labelled() -> None:
    ms = load_preset("sequoia-a100")
    assert "ASSUMED" in ms.metadata["assumptions"] and "demo-config.json" in ms.metadata["source"]
    curve = ms.cost_curve[0]
    assert [curve[m - 1] for m in (1, 2, 4, 8, 16, 32)] == [1.0, 1.0, 1.0, 1.2, 1.4, 1.8]
    assert ms.cost_curve[1].tolist() == [0.03] and np.isclose(rank_vector(ms, 1, 0, 1).sum(), 0.833)
