"""realrun.pipeline on tiny models: batch invariance, held-out split,
the honest recommendation and divergence reports."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from ewif.base.row_cost import max_row_step
from ewif.files.model_set import ModelSet
from ewif.search.recommendation import recommend
from realrun import books
from realrun.family import load_family
from realrun.invariance import batch_invariance
from realrun.methods import recommendation_record
from realrun.pipeline import run_pipeline, split_prompts, timing_diagnostics
from realrun.prompts import CATEGORIES, load_prompts
from realrun.side_by_side import divergences
from realrun.tally import MethodTally
from simulate.decoder.sampling import Decoding


class _Flipping:
    """A TokenModel whose multi-position passes prefer token 1 where single passes prefer 0
    (by a logit gap of 0.25): not batch-invariant at all."""

    name, vocab_size = "flip", 4

    def logits(self, tokens, n):
        z = np.zeros((n, 4), dtype=np.float32)
        z[:, 0 if n == 1 else 1] = 1.0
        z[:, 1 if n == 1 else 0] = 0.75
        return z


def test_batch_invariance_detects_a_flipping_model_and_reports_the_gap():
    texts = [([1, 2], [3, 3, 3, 3, 3, 3, 3, 3])]
    inv = batch_invariance(_Flipping(), texts, m=4)
    assert (inv.positions, inv.agreements, inv.rate) == (8, 0, 0.0)
    assert inv.max_gap == pytest.approx(0.25)
    assert batch_invariance(_Flipping(), texts, m=1).rate == 1.0  # m = 1 is single passes
    assert batch_invariance(_Flipping(), texts, m=4, max_positions=4).positions == 4


def test_float32_tiny_model_is_batch_invariant(tiny_models, tiny_prompts):
    from realrun.hf_model import HFTokenModel

    model = HFTokenModel(tiny_models["target"].model, "target")
    texts = [(p[:4], p[4:]) for p in tiny_prompts]
    inv = batch_invariance(model, texts, m=3)
    assert inv.positions > 10 and inv.rate == 1.0 and inv.max_gap is None


def test_split_is_disjoint_and_in_order(prompt_file):
    measuring, held = split_prompts(str(prompt_file), 2, None)
    every = load_prompts(str(prompt_file))
    assert measuring == every[:2] and held == every[2:]
    assert split_prompts(str(prompt_file), 1, 2)[1] == every[1:3]
    with pytest.raises(ValueError, match="held-out"):
        split_prompts(str(prompt_file), 4, None)


def test_the_classic_split_is_the_one_the_shipped_runs_made():
    measuring, held = split_prompts("classic", 16, 16)
    every = load_prompts("classic")
    assert measuring == every[:16] and held == every[16:32]
    assert [p.id for p in held[:3]] == ["mc-06", "code-06", "math-07"]


def test_split_is_stratified_by_category():
    measuring, held = split_prompts("all", 20, 20)
    assert Counter(p.kind for p in measuring) == {kind: 2 for kind in CATEGORIES.values()}
    assert Counter(p.kind for p in held) == {kind: 2 for kind in CATEGORIES.values()}
    assert not {p.id for p in measuring} & {p.id for p in held}


def test_held_out_categories_are_absent_from_the_measuring_split():
    measuring, held = split_prompts("all", 16, 12, held_out_categories=["rag", "edit"])
    assert len(measuring) == 16 and not {"rag", "edit"} & {p.kind for p in measuring}
    assert Counter(p.kind for p in measuring) == {
        kind: 2 for kind in CATEGORIES.values() if kind not in ("rag", "edit")
    }
    assert {"rag", "edit"} <= {p.kind for p in held}
    assert not {p.id for p in measuring} & {p.id for p in held}
    with pytest.raises(ValueError, match=r"held-out categories \['poetry'\] are not in"):
        split_prompts("all", 4, 4, held_out_categories=["poetry"])
    with pytest.raises(ValueError, match="leave no prompt"):
        split_prompts("rag", 4, 4, held_out_categories=["rag"])


def test_realrun_runs_on_the_held_out_split_and_reports_the_decision(tiny_model_dirs, prompt_file):
    res = run_pipeline(
        [str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"])],
        mag=True,
        prompts=str(prompt_file),
        measure_prompts=2,
        max_new_tokens=5,
        device="cpu",
        dtype="float32",
        threads=1,
        k_max=3,
        leniences=(1.0, 3.0),
        baselines=False,
        progress=False,
    )
    meta = res.metadata
    assert res.prompts == 2
    assert not set(meta["measuring_prompt_ids"]) & set(meta["held_out_prompt_ids"])
    assert meta["recommendation"]["decision"] in ("speculative", "autoregressive")
    errors = [m.prediction_error for m in res.methods if m.kind in ("sd", "csd")]
    assert meta["median_prediction_error"] == pytest.approx(float(np.median(errors)))
    assert meta["divergences"] == [] and set(meta["outputs_differing_from_AR"].values()) == {0}
    assert meta["cpu"]["cores"] >= 1 and meta["dtype"] == "float32"
    measured = ModelSet.from_dict(meta["model_set"], "run")  # α per category, one here
    assert measured.categories.names == ("uncategorized",)
    for lenience, alpha in measured.alpha.items():
        np.testing.assert_allclose(measured.categories["uncategorized"].alpha[lenience], alpha)
    assert meta["held_out_prompt_categories"] == ["uncategorized"] * 2
    ar = next(m for m in res.methods if m.kind == "autoregressive")
    timed_ar_s = meta["model_set"]["metadata"]["ar_seconds_per_token"]
    assert meta["ar_agreement"]["run_s_per_token"] == pytest.approx(1 / ar.tokens_per_s)
    assert meta["ar_agreement"]["error"] == pytest.approx(1 / ar.tokens_per_s / timed_ar_s - 1)


def test_timing_diagnostics_leave_the_ar_methods_passes_to_the_ar_reference(
    tiny_model_dirs, prompt_file, monkeypatch
):
    res = run_pipeline(
        [str(tiny_model_dirs["target"]), str(tiny_model_dirs["near"])],
        prompts=str(prompt_file),
        measure_prompts=2,
        max_new_tokens=4,
        decoding=Decoding(temperature=0.8),  # sampling: the AR method is our decoder
        device="cpu",
        dtype="float32",
        threads=1,
        k_max=2,
        baselines=False,
        progress=False,
    )
    monkeypatch.setattr(books, "MIN_PASSES", 1)  # every size of this short run compared
    model_set = ModelSet.from_dict(res.metadata["model_set"], "run")
    target = model_set.models[0]
    in_run = res.metadata["in_run_pass_seconds"]
    assert "1" in in_run["AR"][target]  # the target's one-token passes: AR's alone
    assert all("1" not in v.get(target, {}) for k, v in in_run.items() if k != "AR")
    got = timing_diagnostics(res, model_set)["timing_agreement"]
    assert "1" not in got.get(target, {}) and got  # the drafters' and reviews' sizes stay
    # every pass's logit rows: a review returns one per position, a drafter's generating or
    # catch-up pass one
    for name, per_model in in_run.items():
        for model, by_m in per_model.items():
            for size, v in by_m.items():
                expected = 1.0 if model != target or name == "AR" else float(size)
                assert v["rows"] == expected, (name, model, size)
    drafter = model_set.models[1]
    timed = model_set.metadata["timing"][drafter]
    assert timed["row_seconds_stderr"] >= 0 and math.isfinite(timed["row_seconds"])
    unit = model_set.metadata["ar_seconds_per_token"]
    if "priced at it" in model_set.metadata.get("row_cost_bounded", {}).get(drafter, ""):
        assert model_set.row_cost[1] * unit < timed["row_seconds"]  # above what c(m) admits
    else:
        assert model_set.row_cost[1] * unit == pytest.approx(max(timed["row_seconds"], 0.0))
    assert model_set.row_cost[0] == 0.0
    # the second row's step: timed paired (one row and two at m = 4), within what the curve
    # admits with the row cost
    step = model_set.metadata["timing"][drafter]
    assert step["row_step_seconds_stderr"] >= 0 and math.isfinite(step["row_step_seconds"])
    s = model_set.row_step[1]
    assert 0.0 <= s <= max_row_step(model_set.cost_curve[1], model_set.row_cost[1]) + 1e-12
    if f"{drafter} step" not in model_set.metadata.get("row_cost_bounded", {}):
        assert s * unit == pytest.approx(step["row_step_seconds"])
    assert model_set.row_step[0] == 0.0
    for size, v in got[drafter].items():
        assert v["run_rows"] == 1.0
        if model_set.row_cost[1]:  # priced at one row: the timed pass less its other rows
            h = model_set.row_cost[1] * unit
            assert v["priced_mean_s"] == pytest.approx(v["timed_mean_s"] - h * (int(size) - 1))


def _model_set(drafter_cost: float, target_curve=(1.0, 1.9, 2.8)) -> ModelSet:
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = 0.6
    return ModelSet(
        models=("t", "d"),
        cost=np.array([1.0, drafter_cost]),
        cost_per_token=np.zeros(2),
        alpha={1.0: alpha},
        cost_curve=(np.array(target_curve), np.array([drafter_cost])),
    )


def test_recommendation_is_honest_when_nothing_beats_autoregressive():
    slow = recommend(_model_set(0.9), k_max=4)
    assert slow.decision == "autoregressive" and slow.ewif <= 1.0
    record = recommendation_record(slow)
    assert record["describe"].startswith(
        "on these costs, decode autoregressively; the best speculative configuration is CSD d "
    )
    assert record["review_sizes"][0]["model"] == "t"
    assert recommend(_model_set(0.0), k_max=4).decision == "autoregressive"  # steep target
    fast = recommend(_model_set(0.0, (1.0, 1.05, 1.1)), k_max=4)
    assert fast.decision == "speculative" and fast.ewif > 1.0
    assert recommendation_record(fast)["describe"].startswith("recommended: CSD d [[")


def test_divergences_report_the_first_differing_token_and_its_logit_gap():
    class Target:
        def logits(self, tokens, n):
            z = np.zeros((n, 5))
            z[:, 3], z[:, 4] = 2.0, 1.5
            return z

    ar, other = MethodTally(outputs=[[1, 3, 2], [1, 2]]), MethodTally(outputs=[[1, 4, 2], [1, 2]])
    found = divergences(Target(), [[0], [0]], {"AR": ar, "X": other}, "AR")
    assert found == [
        {
            "method": "X",
            "prompt": 0,
            "position": 1,
            "ar_token": 3,
            "method_token": 4,
            "logit_gap": pytest.approx(0.5),
        }
    ]
    short = divergences(
        Target(),
        [[0]],
        {"AR": MethodTally(outputs=[[1, 3]]), "Y": MethodTally(outputs=[[1]])},
        "AR",
    )
    assert short[0]["position"] == 1 and short[0]["logit_gap"] is None


def test_load_family_bad_input(tiny_model_dirs):
    with pytest.raises(ValueError, match="needs Max-Gram"):
        load_family([str(tiny_model_dirs["target"])], bigram="x.npz")
    with pytest.raises(ValueError, match="at least two models"):
        load_family([str(tiny_model_dirs["target"])])


def test_a_held_out_category_is_run_but_never_measured(tiny_model_dirs, tmp_path):
    from realrun.tiny import PROMPT_TEXTS

    path = tmp_path / "kinds.jsonl"
    kinds = ["math", "code", "math", "chat"]
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "category": k, "prompt": t}) + "\n"
            for i, (k, t) in enumerate(zip(kinds, PROMPT_TEXTS, strict=True))
        )
    )
    res = run_pipeline(
        [str(tiny_model_dirs["target"])],
        mag=True,
        prompts=str(path),
        measure_prompts=2,
        max_new_tokens=4,
        device="cpu",
        dtype="float32",
        threads=1,
        k_max=2,
        baselines=False,
        progress=False,
        held_out_categories=["chat"],
    )
    meta = res.metadata
    assert meta["measuring_prompt_categories"] == ["math", "code"]
    assert "chat" in meta["held_out_prompt_categories"] and meta["held_out_categories"] == ["chat"]
    measured = ModelSet.from_dict(meta["model_set"], "run")
    assert measured.categories.names == ("math", "code")
