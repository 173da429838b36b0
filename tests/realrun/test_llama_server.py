"""realrun.llama_server on the real llama-server program (built by
benchmarks/build_llamacpp_bin.sh; skipped where it is not built): tiny GGUF models, two
slots, draft-model speculation, one synchronized round, /metrics; 127.0.0.1 only, bounded in
requests and time."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

import pytest

from realrun.llama_server import HOST, LlamaServer, synchronized_rounds

VERSION = os.environ.get("LLAMACPP_VERSION", "0.3.36")
CACHE = Path(os.environ.get("CSD_CACHE", Path.home() / ".cache" / "csd"))
BINARY = CACHE / "llamacpp-bin" / VERSION / "bin" / "llama-server"
needs_server = pytest.mark.skipif(
    not BINARY.is_file(), reason=f"llama-server is not built ({BINARY})"
)


@needs_server
def test_two_slots_speculate_in_lock_step_and_count_their_drafts(tiny_gguf):
    path, _ = tiny_gguf
    args = ["-m", path, "-md", path, "-np", "2", "-c", "512", "-t", "1", "--metrics"]
    args += ["--spec-type", "draft-simple", "--spec-draft-n-max", "3", "--spec-draft-p-min", "0"]
    with LlamaServer(BINARY, [str(a) for a in args], start_timeout=120) as server:
        assert server.url.startswith(f"http://{HOST}:")
        got = synchronized_rounds(server, [[5, 6, 7, 8], [9, 10, 11]], 2, 1, 8, timeout=120)
        text = server.metrics()
    assert got.batch == 2 and len(got.walls) == 1 and got.tokens == 16
    assert all(t["predicted_n"] == 8 for t in got.timings[0])
    # the draft is the target itself: drafts are accepted but where a request's last step
    # drafts past n_predict
    assert got.drafted > 0 and got.drafted / 2 <= got.accepted <= got.drafted
    assert got.decode_tokens_per_s > 0 and got.end_to_end_tokens_per_s > 0
    assert "llamacpp:spec_decode_num_drafts_total" in text
    assert 'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"}' in text
    with pytest.raises(OSError):  # stopped: nothing answers on its port any more
        urllib.request.urlopen(server.url + "/health", timeout=2)


def test_bad_use_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--host/--port"):
        LlamaServer(BINARY, ["--host", "0.0.0.0"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LlamaServer(tmp_path / "nothing", ["-m", "x.gguf"])
    with pytest.raises(ValueError, match="batch"):
        synchronized_rounds(None, [[1]], 0, 1, 4)
