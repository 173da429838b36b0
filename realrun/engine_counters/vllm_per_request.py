"""vLLM's per-request speculative-decoding metrics (``--per-request-spec-decode-metrics``).

With ``summary`` or ``detailed`` (vLLM PR #48915) a response carries a
``metrics.speculative_decoding`` object with ``num_spec_steps``, ``num_draft_tokens``,
``num_accepted_draft_tokens``, ``num_spec_tokens`` and ``acceptance_histogram`` (index ``j``:
verify steps that accepted exactly ``j`` draft tokens). Read as a JSON response, a list of
them or JSON Lines (lines starting with ``#`` are comments, e.g. a capture's provenance
line); the requests add up. Position ``i`` was accepted in the steps that accepted ``i``
tokens or more: ``A_i = Σ_{j≥i} histogram[j]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from realrun.engine_counters.spec_counters import SpecCounters, counter_value


def counters_from_per_request(text: str) -> SpecCounters:
    """The summed counters of every request in ``text`` (module docstring)."""
    body = "\n".join("" if line.lstrip().startswith("#") else line for line in text.splitlines())
    try:
        data = json.loads(body)
        objects = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        objects = []
        for n, line in enumerate(body.splitlines(), start=1):
            if line.strip():
                try:
                    objects.append(json.loads(line.removeprefix("data: ")))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"line {n} is not JSON ({exc.msg})") from None
    records = [r for r in map(_speculative_decoding, objects) if r is not None]
    if not records:
        raise ValueError(
            "no metrics.speculative_decoding object (start vLLM with "
            "--per-request-spec-decode-metrics summary)"
        )
    steps = tokens = accepted = 0
    hist: list[int] = []
    k = 0
    for n, r in enumerate(records, start=1):
        where = f"request {n}"
        h = [
            counter_value(f"{where}: acceptance_histogram[{j}]", v)
            for j, v in enumerate(_list(r, "acceptance_histogram", where))
        ]
        s = counter_value(f"{where}: num_spec_steps", r.get("num_spec_steps"))
        a = counter_value(f"{where}: num_accepted_draft_tokens", r.get("num_accepted_draft_tokens"))
        if sum(h) != s or sum(j * v for j, v in enumerate(h)) != a:
            raise ValueError(
                f"{where}: acceptance_histogram {h} disagrees with num_spec_steps {s} and "
                f"num_accepted_draft_tokens {a}"
            )
        steps, accepted = steps + s, accepted + a
        tokens += counter_value(f"{where}: num_draft_tokens", r.get("num_draft_tokens"))
        spec_tokens = counter_value(
            f"{where}: num_spec_tokens", r.get("num_spec_tokens", len(h) - 1)
        )
        k = max(k, spec_tokens, len(h) - 1)
        hist += [0] * (len(h) - len(hist))
        for j, v in enumerate(h):
            hist[j] += v
    hist += [0] * (k + 1 - len(hist))
    per_position = tuple(sum(hist[i:]) for i in range(1, k + 1))
    return SpecCounters("vllm-per-request", steps, tokens, accepted, k, per_position)


def _speculative_decoding(obj: object) -> dict | None:
    if not isinstance(obj, dict):
        return None
    if "acceptance_histogram" in obj:
        return obj
    metrics = obj.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("speculative_decoding"), dict):
        return metrics["speculative_decoding"]
    return None


def _list(record: Mapping, key: str, where: str) -> list:
    value = record.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{where}: {key} must be a list, got {value!r}")
    return value
