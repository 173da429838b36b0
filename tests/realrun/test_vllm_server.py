"""realrun.vllm_server and realrun.vllm_rounds against a scripted stand-in of vLLM's server
(fixtures/fake_vllm_server.py: vLLM's endpoints and its per-step log format, no model), the
engine-log and per-request parsers on captured vLLM output, and every way a server can fail:
one line, and exit status 2 on the command line. The real vLLM is exercised by
benchmarks/serving_vllm.py (docs/serving.md says why it is not in CI)."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

from realrun.vllm_costs import Cells, ngram_counts
from realrun.vllm_rounds import Round, parse_steps, synchronized_rounds
from realrun.vllm_server import HOST, VllmServer, VllmServerError, vllm_python

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_python(tmp_path) -> Path:
    """A 'python' that runs the stand-in server instead of vLLM's module."""
    path = tmp_path / "python"
    script = FIXTURES / "fake_vllm_server.py"
    path.write_text(f'#!/bin/sh\nshift 2\nexec "{sys.executable}" "{script}" "$@"\n')
    path.chmod(0o755)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone
        return f.read().split(") ")[1][0] != "Z"


def test_synchronized_rounds_prefill_together_and_the_whole_group_stops(fake_python, tmp_path):
    child = tmp_path / "child.pid"
    server = VllmServer(
        "model-dir",
        served_name="m",
        python=fake_python,
        start_timeout=60,
        env={"FAKE_VLLM_CHILD_FILE": str(child)},
    )
    with server as s:
        assert s.url.startswith(f"http://{HOST}:") and s.ready_seconds is not None
        got = synchronized_rounds(s, [[1, 2, 3], [4, 5], [6]], batch=3, rounds=2, max_tokens=5)
        assert "vllm:num_requests_running" in s.metrics()
        pid = int(child.read_text())
        assert _alive(pid)
    assert len(got.rounds) == 2 and all(r.synchronized for r in got.rounds)
    first = got.rounds[0]
    assert first.steps[0].context_requests == 3 and first.steps[0].context_tokens == 6
    assert [s.generation_requests for s in first.decode_steps] == [3] * 4
    assert first.decode_tokens == 3 * 4 and first.engine_decode_seconds == pytest.approx(0.032)
    assert got.decode_tokens_per_s > 0 and got.host_ms_per_step >= 0
    cells = Cells()
    cells.add(got, 0)
    assert cells.table(minimum=3) == {3: {3: 8.0}}
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "a child of the server outlived it"


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        (
            "exit",
            "exited with status 3 before it was ready; last log lines:\nValueError: the model",
        ),
        ("port", "could not listen on http://127.0.0.1:"),
        ("silent", "did not answer /health on http://127.0.0.1:"),
    ],
)
def test_a_server_that_fails_says_how(fake_python, mode, message):
    server = VllmServer(
        "m", served_name="m", python=fake_python, start_timeout=3, env={"FAKE_VLLM_MODE": mode}
    )
    with pytest.raises(VllmServerError, match=message):
        with server:
            pass


def test_a_taken_port_and_a_missing_install_are_refused(tmp_path, fake_python):
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(VllmServerError, match=f"port {port} on 127.0.0.1 is taken"):
            VllmServer("m", served_name="m", python=fake_python, port=port)
    with pytest.raises(
        VllmServerError, match=r"vLLM is not installed .* benchmarks/install_vllm\.sh"
    ):
        vllm_python(cache=tmp_path)
    with pytest.raises(ValueError, match="not in extra"):
        VllmServer("m", served_name="m", python=fake_python, extra=["--port=1"])


def test_the_capture_tool_says_one_line_and_exits_2(fake_python, tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import capture_vllm_metrics
    finally:
        sys.path.pop(0)
    monkeypatch.setenv("FAKE_VLLM_MODE", "silent")
    args = ["--python", str(fake_python), "--model", "m", "--served-name", "m", "--name", "x"]
    args += ["--out-dir", str(tmp_path), "--start-timeout", "2"]
    assert capture_vllm_metrics.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "never ready" in err[0], err


def test_the_captured_iteration_logs_parse():
    """Real vLLM step lines (phase 1's captures): shapes and elapsed times as logged."""
    steps = parse_steps(
        (FIXTURES / "vllm_captured_draft_model_iterations.log").read_text().splitlines()
    )
    assert steps[0].context_requests == 1 and steps[0].elapsed_ms == 1440.35
    assert steps[1].generation_tokens == 4  # one row, k = 3: 1 + 3 positions
    decode = [s for s in steps if s.decode_only]
    assert {s.generation_tokens // s.generation_requests for s in decode} <= {1, 2, 3, 4}
    ar = parse_steps((FIXTURES / "vllm_captured_no_spec_iterations.log").read_text().splitlines())
    assert all(s.generation_tokens == s.generation_requests for s in ar if s.decode_only)


def test_ngram_alpha_by_position_is_exact_from_the_detailed_arrays():
    """The captured n-gram responses (per_step_drafted, per_step_accepted): reviewed and
    accepted by position agree with the Prometheus scrapes of the same run (all drafts full
    length, so there they are exact too: 63/20/11/11 reviewed, 20/11/11/9 accepted)."""
    lines = (FIXTURES / "vllm_captured_ngram_per_request.jsonl").read_text().splitlines()[1:]
    responses = [json.loads(x) for x in lines]
    r = Round(batch=len(responses), responses=responses, wall_s=1.0, steps=[])
    with pytest.raises(ValueError, match="no decode steps"):
        ngram_counts([r])
    prefill = "Iteration(0): 4 context requests, 1 context tokens, 0 generation requests, "
    decode = "Iteration(1): 0 context requests, 0 context tokens, 4 generation requests, "
    tail = "generation tokens, iteration elapsed time: 1.00 ms"
    r.steps = parse_steps([f"{prefill}0 {tail}"] + [f"{decode}4 {tail}"] * 25)
    counts = ngram_counts([r])
    assert counts.reviewed == (63, 20, 11, 11) and counts.accepted == (20, 11, 11, 9)
    assert counts.alpha_by_position == pytest.approx((20 / 63, 11 / 20, 1.0, 9 / 11))
    assert counts.match_rate == 63 / 100


def test_a_drafter_share_below_zero_is_priced_0_and_listed():
    """c_d1(B, k+2) is a difference of two measured steps; where noise makes it negative it is
    priced 0 and reported, never a negative price."""
    from realrun.vllm_costs import drafter_first_pass, negative_differences

    dm = {1: {1: 260.0, 3: 300.0}}  # k = 0 (T = 1) and k = 2 (T = 3) at B = 1
    target = {(1, 1): 200.0, (1, 3): 290.0}
    args = (dm, lambda b, t: target[(b, t)], {1: 20.0}, {1: [0, 2]})
    assert drafter_first_pass(*args) == {1: {2: 60.0, 4: 0.0}}  # 300 − 290 − 20 = −10 → 0
    assert negative_differences(*args) == [{"batch": 1, "positions": 4, "ms": -10.0}]
