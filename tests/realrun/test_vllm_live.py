"""End to end on a real vLLM (slow: excluded from the default suite and from CI, see
docs/serving.md "CI"; run with ``-m slow`` where benchmarks/install_vllm.sh has installed it):
SmolLM2-135M served by vLLM on 127.0.0.1 drafting for itself with a draft model (so every
greedy draft is accepted), two synchronized rounds of two clients, its /metrics and
per-request metrics read back by ``csd measure --from-metrics``, the server and its children
stopped. Bounded: eager mode, 16 tokens, a 600 s start limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ewif import cli
from realrun.loading import cache_root
from realrun.vllm_rounds import synchronized_rounds
from realrun.vllm_server import VllmServer, VllmServerError, vllm_python


def _smollm2() -> Path | None:
    for d in cache_root().glob("*/csd-gguf-source.json"):
        if json.loads(d.read_text()).get("gguf_file", "").startswith("SmolLM2-135M"):
            return d.parent
    return None


def _python() -> Path | None:
    try:
        return vllm_python()
    except VllmServerError:
        return None


MODEL, PYTHON = _smollm2(), _python()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        MODEL is None or PYTHON is None,
        reason="needs vLLM (benchmarks/install_vllm.sh) and SmolLM2 converted (fetch_weights.py)",
    ),
]


def test_vllm_serves_speculates_and_its_counters_come_back(tmp_path, capsys):
    spec = {"method": "draft_model", "model": str(MODEL), "num_speculative_tokens": 3}
    server = VllmServer(
        MODEL, served_name="smollm2", speculative_config=spec, python=PYTHON,
        max_num_seqs=2, max_model_len=512, enforce_eager=True, start_timeout=600,
    )  # fmt: skip
    with server as s:
        before = s.metrics()
        got = synchronized_rounds(s, [[1, 2, 3, 4, 5], [6, 7, 8]], 2, 2, 16)
        after = s.metrics()
    assert all(r.synchronized for r in got.rounds)
    assert all(n == 16 for r in got.rounds for n in r.completion_tokens)
    # a draft model identical to the target: every decode step carries 3 drafts per row
    full = [st for r in got.rounds for st in r.decode_steps if st.generation_requests == 2]
    assert full and all(st.generation_tokens in (2, 4, 6, 8) for st in full)
    files = [tmp_path / "before.prom", tmp_path / "after.prom"]
    for path, text in zip(files, (before, after), strict=True):
        path.write_text(text)
    args = ["measure", "t", "d", "--from-metrics", *map(str, files), "--json"]
    args += ["--cost-curve", "t=1", "--cost-curve", "d=1", "-o", str(tmp_path / "set.json")]
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "vllm-prometheus" and report["counters"]["k"] == 3
    assert report["alpha"] > 0.9  # greedy drafts of the target itself
