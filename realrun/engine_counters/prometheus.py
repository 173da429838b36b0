"""The Prometheus text exposition of vLLM and llama.cpp's ``llama-server`` (``/metrics``).

Both engines export the same four counters, under the prefix ``vllm:`` or ``llamacpp:``:

* **vLLM**: ``vllm:spec_decode_num_drafts``, ``vllm:spec_decode_num_draft_tokens``,
  ``vllm:spec_decode_num_accepted_tokens`` with labels ``model_name``, ``engine``, and
  ``vllm:spec_decode_num_accepted_tokens_per_pos`` with the extra label ``position``
  (0-based, one series per position < ``num_speculative_tokens``); prometheus_client exposes
  a counter's samples with the suffix ``_total``. Source: vllm-project/vllm
  vllm/v1/spec_decode/metrics.py @ ee4ceaae5953d367d8edd2132fd86d6c42506e1e
  (``SpecDecodingProm``: ``observe_draft`` adds 1 to the per-position counter of every
  accepted position) and vllm/v1/metrics/loggers.py @ 005a810bc40faa25b8870fbc8559c3462581eee3
  (``labelnames = ["model_name", "engine"]``).
* **llama-server** (``--metrics``): ``llamacpp:spec_decode_num_drafts_total`` (verification
  steps), ``llamacpp:spec_decode_num_draft_tokens_total``,
  ``llamacpp:spec_decode_num_accepted_tokens_total`` and
  ``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` (0-based), from
  tools/server/server-task.cpp and server-context.cpp of the llama.cpp vendored in
  llama-cpp-python 0.3.36 (ggml-org/llama.cpp @ 0c1e57098bba43ac29e6e3b677cdceebdd22334f).
  The three totals are printed as C++ doubles (6 significant digits: ``1.23457e+06``), the
  per-position counts as integers, so sums are checked to that precision
  (:data:`~realrun.engine_counters.spec_counters.PRINTED_PRECISION`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from realrun.engine_counters.spec_counters import SpecCounters, counter_value

#: The Prometheus counter names shared by vLLM (prefix ``vllm:``) and llama.cpp
#: (``llamacpp:``); samples may carry the ``_total`` suffix.
DRAFTS = "spec_decode_num_drafts"
DRAFT_TOKENS = "spec_decode_num_draft_tokens"
ACCEPTED = "spec_decode_num_accepted_tokens"
PER_POSITION = "spec_decode_num_accepted_tokens_per_pos"
PREFIX = {"vllm": "vllm:", "llama.cpp": "llamacpp:"}


@dataclass(frozen=True)
class Sample:
    """One sample line of a Prometheus text exposition."""

    name: str
    labels: dict[str, str]
    value: float


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')


def parse_prometheus(text: str, source: str = "metrics") -> list[Sample]:
    """The samples of a Prometheus text exposition (version 0.0.4): ``name{labels} value``
    per line, comments and blank lines skipped; a malformed line is a ``ValueError``."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ValueError(f"{source}: line {n} is not a Prometheus sample: {line[:80]!r}")
        labels = {}
        body = (m.group(2) or "{}")[1:-1]
        pos = 0
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            if lm is None:
                raise ValueError(f"{source}: line {n} has malformed labels: {m.group(2)!r}")
            labels[lm.group(1)] = re.sub(
                r"\\(.)", lambda e: "\n" if e[1] == "n" else e[1], lm.group(2)
            )
            pos = lm.end()
        try:
            value = float(m.group(3))
        except ValueError:
            raise ValueError(
                f"{source}: line {n} has a value that is not a number: {m.group(3)!r}"
            ) from None
        out.append(Sample(m.group(1), labels, value))
    return out


def counters_from_prometheus(samples: list[Sample], engine: str, fmt: str) -> SpecCounters:
    """The counters of ``engine`` (``vllm`` or ``llama.cpp``) among ``samples``, as format
    ``fmt``; one model's samples only, every position present."""
    prefix = PREFIX[engine]
    totals: dict[str, float] = {}
    per_position: dict[int, float] = {}
    models = set()
    for s in samples:
        name = s.name.removesuffix("_total")
        if not name.startswith(prefix + "spec_decode_"):
            continue
        key = name[len(prefix) :]
        if key not in (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POSITION):
            continue
        counter_value(s.name, s.value)
        if "model_name" in s.labels:
            models.add(s.labels["model_name"])
        if key == PER_POSITION:
            pos = s.labels.get("position", "")
            if not pos.isdigit():
                raise ValueError(f"{s.name} needs an integer position label, got {s.labels}")
            per_position[int(pos)] = per_position.get(int(pos), 0.0) + s.value
        else:
            totals[key] = totals.get(key, 0.0) + s.value
    if len(models) > 1:
        raise ValueError(
            f"the counters of several models are mixed ({sorted(models)}): keep one model's samples"
        )
    missing = [prefix + k for k in (DRAFTS, DRAFT_TOKENS, ACCEPTED) if k not in totals]
    if missing:
        raise ValueError(f"missing counter(s) {', '.join(missing)}")
    if not per_position:
        if not any(totals.values()):  # llama-server prints them once it has verified a draft
            return SpecCounters(fmt, 0, 0, 0, k=0, model_name=next(iter(models), None))
        raise ValueError(
            f"no {prefix}{PER_POSITION} samples: the per-position counters are needed for α by "
            "position"
        )
    k = max(per_position) + 1
    absent = [i for i in range(k) if i not in per_position]
    if absent:
        raise ValueError(
            f"{prefix}{PER_POSITION} must have every position 0..{k - 1}; missing {absent}"
        )
    return SpecCounters(
        fmt,
        drafts=totals[DRAFTS],
        draft_tokens=totals[DRAFT_TOKENS],
        accepted=totals[ACCEPTED],
        k=k,
        per_position=tuple(per_position[i] for i in range(k)),
        model_name=next(iter(models), None),
    )
