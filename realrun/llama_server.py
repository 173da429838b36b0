"""llama.cpp's HTTP server (``llama-server``) on 127.0.0.1, driven by synchronized clients.

:class:`LlamaServer` starts the server program with the flags given (``-np B`` parallel
slots, speculation flags or none), waits until ``/health`` answers, and stops it; the host
is always ``127.0.0.1`` and the port a free one. :func:`synchronized_rounds` measures it the
way :mod:`ewif.predict.batch` models a batch: in every round ``B`` clients send one completion
request each at the same moment (a barrier), each with its own prompt as token ids, greedy,
``n_predict`` tokens with EOS ignored, no prompt cache reuse; the server runs the ``B`` rows
in lock-step. Per round it records the client wall time and, per request, the server's own
timings (``prompt_ms``, ``predicted_n``, ``predicted_ms`` and, when speculating, ``draft_n``,
``draft_n_accepted``).

Throughput. The *decode* throughput of a round is ``Σ predicted_n / max predicted_ms`` — the
steady-state generation speed of ``B`` rows, prompt processing excluded, which is what
:func:`ewif.predict.batch.batch_ratio` predicts; the *end-to-end* throughput ``Σ predicted_n /
wall`` includes prompt processing and the HTTP round trip. Both are summed over rounds (tokens over
seconds). ``/metrics`` (Prometheus text, ``--metrics``) is captured after the rounds: the
server's own speculative counters (``llamacpp:spec_decode_*``).
"""

from __future__ import annotations

import ctypes
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ewif.base import validate

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process, before it starts: ask Linux to stop it when the process
    that started it dies (``prctl(PR_SET_PDEATHSIG, SIGTERM)``), so a killed benchmark
    leaves no server behind; nothing elsewhere."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


class LlamaServer:
    """``llama-server`` with ``args`` on 127.0.0.1 (a context manager: started on entry,
    stopped on exit). ``--host``/``--port`` are added here and must not be in ``args``."""

    def __init__(
        self, binary: str | Path, args: Sequence[str], *, start_timeout: float = 300.0
    ) -> None:
        if any(a in ("--host", "--port") for a in args):
            raise ValueError("give llama-server's flags without --host/--port (set here)")
        self.binary = Path(binary)
        if not self.binary.is_file():
            raise FileNotFoundError(f"llama-server binary {str(self.binary)!r} does not exist")
        self.args = [str(a) for a in args]
        self.port = free_port()
        self.start_timeout = validate.cost("start_timeout", start_timeout)
        self._proc: subprocess.Popen | None = None
        self.log: list[str] = []

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> LlamaServer:
        cmd = [str(self.binary), *self.args, "--host", HOST, "--port", str(self.port)]
        self._proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_die_with_parent,
        )
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                tail = "\n".join(self.log[-20:])
                raise RuntimeError(f"llama-server exited with {self._proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.25)
        self.__exit__(None, None, None)
        raise TimeoutError(f"llama-server did not answer /health in {self.start_timeout:g} s")

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self.log.append(line.rstrip("\n"))
            del self.log[:-500]

    def __exit__(self, *exc) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def post(self, path: str, body: dict, timeout: float) -> dict:
        data = json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def metrics(self) -> str:
        """The ``/metrics`` Prometheus text (the server must run with ``--metrics``)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            return r.read().decode()


@dataclass
class Rounds:
    """What :func:`synchronized_rounds` measured: per round the wall seconds, per request
    the server's ``timings`` object."""

    batch: int
    walls: list[float] = field(default_factory=list)
    timings: list[list[dict]] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(t["predicted_n"] for r in self.timings for t in r)

    @property
    def decode_tokens_per_s(self) -> float:
        """``Σ predicted_n / Σ_rounds max predicted_ms`` (module docstring)."""
        seconds = sum(max(t["predicted_ms"] for t in r) for r in self.timings) / 1000
        return self.tokens / seconds

    @property
    def end_to_end_tokens_per_s(self) -> float:
        return self.tokens / sum(self.walls)

    @property
    def drafted(self) -> int:
        return sum(t.get("draft_n", 0) for r in self.timings for t in r)

    @property
    def accepted(self) -> int:
        return sum(t.get("draft_n_accepted", 0) for r in self.timings for t in r)

    def to_dict(self) -> dict:
        return {
            "batch": self.batch,
            "rounds": len(self.walls),
            "tokens": self.tokens,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "end_to_end_tokens_per_s": self.end_to_end_tokens_per_s,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "walls_s": self.walls,
            "timings": self.timings,
        }


def synchronized_rounds(
    server: LlamaServer,
    prompts: Sequence[Sequence[int]],
    batch: int,
    rounds: int,
    n_predict: int,
    *,
    timeout: float = 600.0,
) -> Rounds:
    """``rounds`` rounds of ``batch`` simultaneous greedy completions (module docstring);
    round ``r``, client ``c`` sends ``prompts[(r·batch + c) % len(prompts)]``."""
    batch = validate.count("batch", batch, minimum=1)
    rounds = validate.count("rounds", rounds, minimum=1)
    n_predict = validate.count("n_predict", n_predict, minimum=1)
    if not prompts:
        raise ValueError("prompts must hold at least one prompt")
    out = Rounds(batch)
    for r in range(rounds):
        barrier = threading.Barrier(batch)
        results: list[dict | BaseException] = [RuntimeError("no answer")] * batch

        def client(c: int, r: int = r, barrier=barrier, results=results) -> None:
            body = {
                "prompt": [int(t) for t in prompts[(r * batch + c) % len(prompts)]],
                "n_predict": n_predict,
                "temperature": 0.0,
                "ignore_eos": True,
                "cache_prompt": False,
                "stream": False,
            }
            barrier.wait()
            try:
                results[c] = server.post("/completion", body, timeout)
            except BaseException as exc:  # re-raised below, in the main thread
                results[c] = exc

        threads = [threading.Thread(target=client, args=(c,)) for c in range(batch)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out.walls.append(time.perf_counter() - start)
        for res in results:
            if isinstance(res, BaseException):
                raise RuntimeError(f"a completion request failed: {res}") from res
        out.timings.append([res["timings"] for res in results])
    return out
