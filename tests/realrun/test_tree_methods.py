"""Token-tree methods in a side-by-side run (realrun.tree_methods, realrun.tree_timing and the
pipeline's ``trees=True``) on tiny models: the tree search's methods run losslessly and are
predicted by the exact tree EWIF with a bootstrap interval; ``csd realrun --trees`` end to end.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ewif.cli import main
from ewif.files import results as results_io
from ewif.files.tree_config import TreeConfig, TreeSpec
from ewif.files.tree_models import tree_cascade
from ewif.search.tree_search import TreeBounds, optimize_trees
from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.maxgram import MaxGram
from realrun.measure import measure
from realrun.methods import default_methods
from realrun.predictions import is_tree_config
from realrun.side_by_side import run_side_by_side
from realrun.tiny import EOS, PROMPT_TEXTS
from realrun.tree_methods import method_cascade, tree_method, tree_methods, tree_record
from realrun.tree_timing import bushy_parents, time_tree_passes

NEW = 10


@pytest.fixture(scope="module")
def family(tiny_models, tiny_tokenizer):
    return {
        "target": HFTokenModel(tiny_models["target"].model, "target"),
        "near": HFTokenModel(tiny_models["near"].model, "near"),
        "mag": MaxGram(BigramTable.from_corpus(PROMPT_TEXTS, tiny_tokenizer)),
    }


@pytest.fixture(scope="module")
def measured(family, tiny_prompts):
    chain = [family[n] for n in ("target", "near", "mag")]
    return measure(
        chain,
        tiny_prompts[:2],
        max_new_tokens=NEW,
        leniences=(1.0, 3.0),
        max_m=6,
        repeats=2,
        warmup=0,
        progress=False,
    )


def test_tree_method_names_and_configs():
    spec = TreeSpec("target", "mag", (-1, 0, 0, 1), None)
    review = tree_method(TreeConfig(("target", "mag"), [[3]], 1.0, spec))
    assert review.name == "Tree mag 3 nodes depth 2" and review.tree is not None
    assert TreeConfig.from_dict(review.config) == review.tree
    nested_spec = TreeSpec("near", "mag", spec.parents, None)
    nested = tree_method(TreeConfig(("target", "near", "mag"), [[2, 0], [0, 3]], 3.0, nested_spec))
    assert nested.name == "CSD near>mag [[2, 0], [0, 3]] l=3 tree near<mag 3 nodes depth 2"
    sib = tree_method(TreeConfig(("target", "near"), [[2]], 1.0, None, {"near": 1}))
    assert sib.name == "CSD near [[2]] siblings near:1" and sib.config["siblings"] == {"near": 1}
    chain = tree_method(TreeConfig(("target", "near"), [[2]]))
    assert chain.tree is None and not is_tree_config(chain.config)


def test_tree_methods_run_losslessly_and_are_predicted(family, measured, tiny_prompts):
    search = optimize_trees(measured, bounds=TreeBounds(k_max=3, nodes=6, depth=3, siblings=2))
    methods = [m for m in default_methods(measured, [], k_max=3) if not m.kind.startswith("hf")]
    added = tree_methods(search, methods)
    # forced: a Max-Gram tree reviewed by the target, whatever the search says
    forced = tree_method(
        TreeConfig(("target", "mag"), [[4]], 1.0, TreeSpec("target", "mag", (-1, 0, 0, 1, 3), None))
    )
    assert {m.name for m in added} >= {tree_method(search.best_tree.config).name}
    res = run_side_by_side(
        methods + added + [forced],
        family,
        tiny_prompts[2:],
        model_set=measured,
        max_new_tokens=NEW,
        eos_token_id=EOS,
        progress=False,
    )
    assert set(res.metadata["outputs_differing_from_AR"].values()) == {0}
    lengths = res.metadata["generation_lengths"]
    trees = [m for m in res.methods if is_tree_config(m.config)]
    assert len(trees) >= 2
    for m in trees:
        config = TreeConfig.from_dict(m.config)
        assert m.predicted_speedup == pytest.approx(
            tree_cascade(measured, config).ewif(lengths[m.name]), rel=1e-12
        )
        interval = res.metadata["prediction_intervals"][m.name]
        assert interval["low"] <= interval["point"] <= interval["high"]
        assert m.name not in res.metadata.get("replay_predictions", {})
        assert m.mean_accepted_length >= 1.0
    record = tree_record(search)
    assert record["decision"] in ("tree", "chain", "autoregressive")
    assert record["best_tree"]["predicted_ewif"] == pytest.approx(search.best_tree.ewif)


def test_method_cascade_prices_trees_and_chains(measured):
    spec = TreeSpec("target", "mag", (-1, 0, 0), None)
    tree = tree_method(TreeConfig(("target", "mag"), [[2]], 1.0, spec))
    chain = tree_method(TreeConfig(("target", "mag"), [[2]]))
    assert method_cascade(measured, tree).ewif() == tree_cascade(measured, tree.tree).ewif()
    want = measured.to_cascade(("target", "mag"), np.array([[2]]), 1.0).ewif()
    assert method_cascade(measured, chain).ewif() == want


def test_tree_pass_timing(family, tiny_prompts):
    assert bushy_parents(5) == [-1, -1, 0, 0, 1]
    torch.set_num_threads(1)
    found = time_tree_passes([family["target"]], tiny_prompts[:2], 4, rounds=2, warmup=0, seed=1)
    record = found["target"].to_dict()
    assert record["m"] == [2, 3, 4]
    assert all(s > 0 for s in record["tree_seconds"] + record["chain_seconds"])
    assert len(record["ratio"]) == 3 and record["mean_ratio"] > 0
    with pytest.raises(ValueError, match="max_m must be at least 2"):
        time_tree_passes([family["target"]], tiny_prompts[:1], 1)


def test_cli_realrun_trees(tiny_model_dirs, tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPT_TEXTS))
    out = tmp_path / "r.json"
    code = main(
        [
            "realrun",
            str(tiny_model_dirs["target"]),
            str(tiny_model_dirs["near"]),
            "--mag",
            "--prompts",
            str(prompts),
            "--measure-prompts",
            "2",
            "--limit",
            "2",
            "--max-new-tokens",
            "6",
            "--dtype",
            "float32",
            "--threads",
            "1",
            "--k-max",
            "3",
            "--no-baselines",
            "--trees",
            "-o",
            str(out),
        ]
    )
    assert code == 0
    res = results_io.load(out)
    record = res.metadata["tree_recommendation"]
    assert record["decision"] in ("tree", "chain", "autoregressive")
    assert set(res.metadata["tree_pass_timing"]) == {"target", "near"}
    names = {m.name for m in res.methods}
    assert record["best_tree"] is not None and record["best_tree"]["method"] in names
    assert set(res.metadata["outputs_differing_from_AR"].values()) == {0}
    report = capsys.readouterr().out
    assert f"token trees: the exact tree search says {record['decision']}" in report
    assert "tree/chain pass time, target: mean" in report


def test_sampled_tree_methods_run(family, measured, tiny_prompts):
    """Sampling: siblings drawn without replacement from the drafter's law and a Max-Gram tree,
    run side by side with a sampled AR (losslessness itself is the χ² tests' job,
    tests/simulate/test_tree_decoder.py)."""
    from simulate.decoder.sampling import Decoding

    spec = TreeSpec("target", "mag", (-1, 0, 0, 1), None)
    methods = [
        default_methods(measured, [], k_max=2)[0],
        tree_method(TreeConfig(("target", "near"), [[2]], 1.0, None, {"near": 1})),
        tree_method(TreeConfig(("target", "mag"), [[3]], 1.0, spec)),
    ]
    res = run_side_by_side(
        methods,
        family,
        tiny_prompts[2:],
        model_set=measured,
        max_new_tokens=NEW,
        eos_token_id=EOS,
        decoding=Decoding(0.8),
        progress=False,
    )
    for m in res.methods[1:]:
        assert m.tokens > 0 and m.predicted_speedup > 0 and m.mean_accepted_length >= 1.0
