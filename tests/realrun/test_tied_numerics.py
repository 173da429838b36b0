"""benchmarks/tied_numerics.py: which arms a numerics search's tie puts side by side."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tied_arms():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from tied_numerics import tied_arms
    finally:
        sys.path.pop(0)
    return tied_arms


def _trial(dtype, threads, predicted, excluded_by, decision="speculative", K=((1,),)):
    models = ["t", "mag"] if len(K) == 1 else ["t", "d", "mag"]
    return {
        "dtype": dtype,
        "threads": threads,
        "predicted_tokens_per_s": predicted,
        "excluded_by": excluded_by,
        "ar_seconds_per_token": 0.25,
        "recommendation": {
            "decision": decision,
            "best_speculative": f"CSD {K}",
            "config": {"models": models, "K": [list(r) for r in K], "lenience": 1.0},
        },
    }


def test_the_choice_first_then_every_faster_candidate_at_its_threads_then_its_ar():
    tied_arms = _tied_arms()
    trials = [
        _trial("float32", 2, 4.7, "separated earlier", K=((1, 0), (0, 1))),
        _trial("float32", 1, 5.0, "quick-look bound"),  # other thread count: not an arm
        _trial("float16", 2, 4.9, "separated earlier", decision="autoregressive"),
        _trial("bfloat16", 2, 4.6, None, K=((2, 1), (0, 1))),
        _trial("bfloat16", 1, 3.0, "separated"),  # slower: not an arm
    ]
    arms = tied_arms(trials, "t")
    assert [(d, m.kind) for d, m, _ in arms] == [
        ("bfloat16", "csd"),
        ("float32", "csd"),
        ("float16", "autoregressive"),
        ("bfloat16", "autoregressive"),
    ]
    assert arms[0][1].K == ((2, 1), (0, 1)) and arms[1][1].K == ((1, 0), (0, 1))
    assert [p for _, _, p in arms] == [4.6, 4.7, 4.9, 4.0]


def test_the_shipped_tie_reads_back():
    """The shipped run whose tie the benchmark settled names the arms the file records."""
    tied_arms = _tied_arms()
    run = json.loads((ROOT / "realrun/data/cpu_results_qwen_xeon.json").read_text())
    record = json.loads((ROOT / "realrun/data/tied_numerics_qwen.json").read_text())
    arms = tied_arms(run["metadata"]["model_set"]["metadata"]["numerics_trials"], "qwen-1.5b")
    assert [f"{d} {m.name}" for d, m, _ in arms] == list(record["tokens_per_s"])
    assert record["choice"] == f"{arms[0][0]} {arms[0][1].name}"
