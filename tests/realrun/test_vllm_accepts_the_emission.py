"""vLLM itself accepts what ``csd recommend --emit vllm`` prints: the emitted
``--speculative-config`` (a draft model with a per-batch-size schedule, and an n-gram lookup),
model names mapped to the converted Qwen directories, goes through vLLM's own argument parser,
engine-config and ``SpeculativeConfig`` validation and the scheduler's schedule lookup, in
vLLM's environment (benchmarks/install_vllm.sh). Marked slow (``pytest -m slow``); skipped
where that environment or the converted weights are missing (CI: docs/serving.md, "CI");
benchmarks/serving_vllm.py repeats the check on the configurations it serves."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ewif.files import model_set as model_io
from ewif.files import vllm_profile
from ewif.serving.emit import DRAFT_MODEL, NGRAM, emission
from realrun.loading import cache_root
from realrun.vllm_server import VllmServerError, check_speculative_config, vllm_python

ROOT = Path(__file__).resolve().parents[2]
SIZES = [1, 2, 4, 8]


def _python() -> Path | None:
    try:
        return vllm_python()
    except VllmServerError:
        return None


def _dirs() -> dict[str, Path]:
    """The converted Qwen directories (realrun.loading.convert_gguf's cache), by set name."""
    found = {}
    for d in cache_root().glob("*/csd-gguf-source.json"):
        name = json.loads(d.read_text()).get("gguf_file", "")
        if name == "Qwen2.5-Coder-1.5B-Instruct.gguf":
            found["qwen-1.5b"] = d.parent
        elif name == "Qwen2.5-Coder-0.5B-Instruct.gguf":
            found["qwen-0.5b"] = d.parent
    return found


PYTHON, DIRS = _python(), _dirs()
pytestmark = [
    pytest.mark.slow,  # each check starts vLLM's python (about 20 s); CI has no vLLM anyway
    pytest.mark.skipif(
        PYTHON is None or len(DIRS) < 2,
        reason="needs vLLM's environment (benchmarks/install_vllm.sh) and the converted Qwen "
        "1.5B/0.5B weights (benchmarks/fetch_weights.py)",
    ),
]


def _qwen_set(keep: str) -> model_io.ModelSet:
    """The measured Qwen set with one drafter left (``keep``), so that drafter is emitted."""
    from dataclasses import replace

    ms = model_io.load(ROOT / "realrun" / "data" / "models_qwen.json")
    drop = ms.index("mag" if keep == "qwen-0.5b" else "qwen-0.5b")
    a = {lenience: m.copy() for lenience, m in ms.alpha.items()}
    for m in a.values():
        m[0, drop] = np.nan
    return replace(ms, alpha=a, bootstrap=None)


@pytest.mark.parametrize("which", ["draft model", "n-gram"])
def test_vllm_accepts_the_emitted_config_as_printed(which):
    ms = _qwen_set("qwen-0.5b" if which == "draft model" else "mag")
    paths = {name: str(path) for name, path in DIRS.items()}
    profile_path = ROOT / "realrun" / "data" / "vllm_profile_qwen.json"
    profile = vllm_profile.load(profile_path) if profile_path.is_file() else None
    em = emission(ms, "vllm", SIZES, k_max=profile.k_max("ngram") if profile else 6,
                  paths=paths, profile=profile)  # fmt: skip
    # what is printed to run: the emitted config, or, where speculation does not pay, the
    # declined one printed "to try it, or to check the 'no'"
    config, text, plan = em.config, em.text, em.plan
    if not config:
        assert em.declined is not None
        config, text, plan = em.declined.config, em.declined.text, em.declined.plan
    assert plan.method == (DRAFT_MODEL if which == "draft model" else NGRAM)
    printed = text.split("--speculative-config ", 1)[1].strip("'")
    assert json.loads(printed) == config  # the text carries exactly the config
    verdict = check_speculative_config(paths["qwen-1.5b"], json.loads(printed), python=PYTHON)
    assert verdict["ok"], verdict
    assert verdict["method"] == config["method"]
    schedule = config.get("num_speculative_tokens_per_batch_size")
    for low, high, k in schedule or [[1, max(SIZES), config["num_speculative_tokens"]]]:
        for b in range(low, high + 1):  # vLLM's own lookup gives the emitted k at every size
            assert (verdict["lookup"][b] if schedule else verdict["k"]) == k


def test_vllm_refuses_what_it_does_not_know():
    """The check is vLLM's: an unknown key is refused (so an accepted config means something)."""
    bad = {"method": "ngram", "num_speculative_tokens": 2, "num_speculative_tokens_per_batch": 1}
    verdict = check_speculative_config(DIRS["qwen-1.5b"], bad, python=PYTHON)
    assert not verdict["ok"] and "num_speculative_tokens_per_batch" in verdict["error"]
