"""Synchronized rounds of ``B`` clients against a vLLM server, measured by the engine itself.

One round: the server is paused (``/pause?mode=keep``: new requests wait in its queue),
``B`` clients each send one completion request (their own prompt as token ids, greedy,
``max_tokens`` with EOS ignored), and once every request has been sent the server is
resumed, so its scheduler takes all ``B`` prompts into **one** prefill step and then decodes
the ``B`` rows in lock-step — the batch :mod:`ewif.predict.batch` models. The round records:

* per request, vLLM's own metrics: ``completion_tokens``, ``generation_time_ms`` (engine-core
  time from the first output token to the last, ``vllm/entrypoints/generate/base/serving.py``)
  and, when speculating, ``metrics.speculative_decoding``;
* the engine steps of the round from the server log (``--enable-logging-iteration-details``,
  ``vllm/v1/metrics/loggers.py``: per step its context and generation requests and tokens
  and the *iteration elapsed time*, taken around the worker's execute-model, sampling and
  drafting in ``EngineCore.step``, ``vllm/v1/engine/core.py``).

Throughput. A round's decode throughput is ``Σ (completion_tokens − 1) / max
generation_time_ms``: every token after the first comes from a decode step, and with one
prefill step all rows start decoding at the same engine step, so ``max generation_time_ms``
is the wall time of the round's decode steps (host scheduling and output handling
included). Summed over rounds (tokens over seconds). The engine-time variant divides by the
summed elapsed time of the decode steps instead; their difference per step is the host
overhead ``o`` outside the worker.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ewif.base import validate
from realrun.vllm_server import HOST, VllmServer, VllmServerError

#: One ``--enable-logging-iteration-details`` line (``vllm/v1/metrics/loggers.py``).
ITERATION = re.compile(
    r"Iteration\((\d+)\): (\d+) context requests, (\d+) context tokens, (\d+) generation "
    r"requests, (\d+) generation tokens, iteration elapsed time: ([\d.]+) ms"
)


@dataclass(frozen=True)
class Step:
    """One engine step as vLLM logs it: prefill (context) and decode (generation) requests
    and their scheduled tokens, and the step's elapsed milliseconds."""

    index: int
    context_requests: int
    context_tokens: int
    generation_requests: int
    generation_tokens: int
    elapsed_ms: float

    @property
    def decode_only(self) -> bool:
        return self.context_requests == 0 and self.generation_requests > 0


def parse_steps(lines: Sequence[str]) -> list[Step]:
    """The engine steps among the log ``lines`` (other lines ignored)."""
    out = []
    for line in lines:
        m = ITERATION.search(line)
        if m is not None:
            *counts, ms = m.groups()
            out.append(Step(*(int(c) for c in counts), float(ms)))  # type: ignore[arg-type]
    return out


@dataclass
class Round:
    """One synchronized round: the responses (in client order), the client wall seconds from
    the resume to the last answer, and the engine steps the round ran."""

    batch: int
    responses: list[dict]
    wall_s: float
    steps: list[Step]

    @property
    def synchronized(self) -> bool:
        """The first step prefilled all ``B`` prompts and nothing else ran before it."""
        return bool(self.steps) and (
            self.steps[0].context_requests == self.batch and self.steps[0].generation_requests == 0
        )

    @property
    def decode_steps(self) -> list[Step]:
        return self.steps[1:]

    @property
    def completion_tokens(self) -> list[int]:
        return [int(r["usage"]["completion_tokens"]) for r in self.responses]

    @property
    def decode_tokens(self) -> int:
        return sum(n - 1 for n in self.completion_tokens)

    @property
    def decode_seconds(self) -> float:
        """Wall seconds of the round's decode steps: the largest ``generation_time_ms``."""
        return max(float(r["metrics"]["generation_time_ms"]) for r in self.responses) / 1000

    @property
    def engine_decode_seconds(self) -> float:
        return sum(s.elapsed_ms for s in self.decode_steps) / 1000

    def to_dict(self) -> dict:
        return {
            "batch": self.batch,
            "synchronized": self.synchronized,
            "wall_s": self.wall_s,
            "completion_tokens": self.completion_tokens,
            "decode_tokens": self.decode_tokens,
            "decode_seconds": self.decode_seconds,
            "engine_decode_seconds": self.engine_decode_seconds,
            "steps": [
                [s.context_requests, s.generation_requests, s.generation_tokens, s.elapsed_ms]
                for s in self.steps
            ],
            "speculative_decoding": [
                r["metrics"].get("speculative_decoding") for r in self.responses
            ],
        }


@dataclass
class Rounds:
    """The rounds of one batch size on one server (module docstring)."""

    batch: int
    rounds: list[Round] = field(default_factory=list)

    @property
    def decode_tokens_per_s(self) -> float:
        return sum(r.decode_tokens for r in self.rounds) / sum(
            r.decode_seconds for r in self.rounds
        )

    @property
    def engine_decode_tokens_per_s(self) -> float:
        return sum(r.decode_tokens for r in self.rounds) / sum(
            r.engine_decode_seconds for r in self.rounds
        )

    @property
    def end_to_end_tokens_per_s(self) -> float:
        return sum(sum(r.completion_tokens) for r in self.rounds) / sum(
            r.wall_s for r in self.rounds
        )

    @property
    def host_ms_per_step(self) -> float:
        """Mean host time per decode step outside the worker: (wall − elapsed) / steps."""
        steps = sum(len(r.decode_steps) for r in self.rounds)
        extra = sum(r.decode_seconds - r.engine_decode_seconds for r in self.rounds)
        return 1000 * extra / steps

    def to_dict(self) -> dict:
        return {
            "batch": self.batch,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "engine_decode_tokens_per_s": self.engine_decode_tokens_per_s,
            "end_to_end_tokens_per_s": self.end_to_end_tokens_per_s,
            "host_ms_per_step": self.host_ms_per_step,
            "rounds": [r.to_dict() for r in self.rounds],
        }


def synchronized_rounds(
    server: VllmServer,
    prompts: Sequence[Sequence[int]],
    batch: int,
    rounds: int,
    max_tokens: int,
    *,
    timeout: float = 900.0,
    first_prompt: int = 0,
    extra: Mapping | None = None,
) -> Rounds:
    """``rounds`` rounds of ``batch`` requests started in one engine step (module
    docstring); round ``r``, client ``c`` sends ``prompts[(first_prompt + r·batch + c) %
    len(prompts)]``. A round whose first step did not take all ``batch`` prompts is an
    error (the server was not idle, or its token budget is too small for the prompts).
    ``extra``: more fields of every request body (e.g. ``return_token_ids``)."""
    batch = validate.count("batch", batch, minimum=1)
    rounds = validate.count("rounds", rounds, minimum=1)
    max_tokens = validate.count("max_tokens", max_tokens, minimum=2)
    if not prompts:
        raise ValueError("prompts must hold at least one prompt")
    out = Rounds(batch)
    for r in range(rounds):
        chosen = [prompts[(first_prompt + r * batch + c) % len(prompts)] for c in range(batch)]
        one = _one_round(server, chosen, max_tokens, timeout, dict(extra or {}))
        if not one.synchronized:
            first = one.steps[0] if one.steps else None
            raise VllmServerError(
                f"round {r} at batch {batch} did not start in one prefill step (first step: "
                f"{first}); raise --max-num-batched-tokens or keep the server idle"
            )
        out.rounds.append(one)
    return out


def _one_round(
    server: VllmServer, prompts: list, max_tokens: int, timeout: float, extra: dict
) -> Round:
    body = {
        **extra,
        "model": server.served_name,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": False,
    }
    b = len(prompts)
    sent = threading.Barrier(b + 1)
    results: list[dict | BaseException] = [VllmServerError("no answer")] * b

    def client(c: int) -> None:
        conn = http.client.HTTPConnection(HOST, server.port, timeout=timeout)
        try:
            data = json.dumps({**body, "prompt": [int(t) for t in prompts[c]]})
            conn.request("POST", "/v1/completions", data, {"Content-Type": "application/json"})
            sent.wait()
            answer = conn.getresponse()
            text = answer.read()
            if answer.status != 200:
                raise VllmServerError(
                    f"completion request failed ({answer.status}): {text[:200]!r}"
                )
            results[c] = json.loads(text)
        except BaseException as exc:  # re-raised below, in the main thread
            results[c] = exc
            sent.abort()
        finally:
            conn.close()

    before = len(server.log)
    server.pause()
    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(b)]
    for t in threads:
        t.start()
    try:
        sent.wait(timeout=60)
    except threading.BrokenBarrierError:
        pass
    time.sleep(0.3)  # the API server hands the requests to the engine core
    start = time.perf_counter()
    server.resume()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    for res in results:
        if isinstance(res, BaseException):
            raise VllmServerError(f"a completion request failed: {res}") from res
    steps = _settled_steps(server, before)
    return Round(b, results, wall, steps)  # type: ignore[arg-type]


def _settled_steps(server: VllmServer, before: int) -> list[Step]:
    """The steps logged since line ``before``, once no new step line appeared for 0.5 s (the
    log line of a step may follow its answer)."""
    seen, quiet = -1, 0.0
    while quiet < 0.5:
        steps = parse_steps(server.log[before:])
        if len(steps) == seen:
            quiet += 0.1
        else:
            seen, quiet = len(steps), 0.0
        time.sleep(0.1)
    return steps
