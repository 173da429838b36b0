"""Reading counter files of any format: recognised by content, scrapes subtracted, files added.

SGLang exports no comparable counters: only the gauges ``sglang:spec_accept_length`` and
``sglang:spec_accept_rate``, means over its last logging interval (sgl-project/sglang
python/sglang/srt/metrics/collector.py @ 00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538), from
which neither α by position nor an interval can be formed: rejected with that message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from realrun.engine_counters.prometheus import counters_from_prometheus, parse_prometheus
from realrun.engine_counters.spec_counters import SpecCounters, summed
from realrun.engine_counters.speculative_simple import SIMPLE_STATS, counters_from_simple_log
from realrun.engine_counters.vllm_per_request import counters_from_per_request

#: ``--engine`` choices (``auto``: recognised by content).
ENGINES = ("auto", "vllm", "llama.cpp", "sglang")
SGLANG_REJECTED = (
    "SGLang exports no cumulative drafted/accepted counters and no per-position counters, only "
    "the gauges sglang:spec_accept_length and sglang:spec_accept_rate (means over its last "
    "logging interval; python/sglang/srt/metrics/collector.py): α by position and its "
    "interval cannot be formed from them. Measure α with csd measure on the same models, or "
    "serve with vLLM or llama-server to read their counters"
)


def read_counters(paths: Sequence[str | Path], engine: str = "auto") -> SpecCounters:
    """The counters of ``paths``: one Prometheus scrape, or two (earlier first: the counts
    between them); per-request JSON files and llama-speculative-simple logs add up."""
    if engine not in ENGINES:
        raise ValueError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "sglang":
        raise ValueError(SGLANG_REJECTED)
    if not paths:
        raise ValueError("give at least one metrics file")
    parsed = [parse_counters(_read(p), engine, str(p)) for p in paths]
    formats = {c.format for c in parsed}
    if len(formats) > 1:
        raise ValueError(f"the metrics files hold different formats: {sorted(formats)}")
    if parsed[0].format.endswith("prometheus"):
        if len(parsed) > 2:
            raise ValueError(
                f"give one Prometheus scrape or two (before and after a run), got {len(parsed)}"
            )
        return parsed[1].minus(parsed[0]) if len(parsed) == 2 else parsed[0]
    return summed(parsed)


def parse_counters(text: str, engine: str = "auto", source: str = "metrics") -> SpecCounters:
    """The counters in one file's ``text`` (format recognised by content, or ``engine``'s)."""
    fmt = _detect(text, source)
    if engine == "sglang" or fmt == "sglang":
        raise ValueError(SGLANG_REJECTED)
    owner = {"vllm-prometheus": "vllm", "vllm-per-request": "vllm"}.get(fmt, "llama.cpp")
    if engine not in ("auto", owner):
        raise ValueError(f"{source}: --engine {engine} given, but the file holds {fmt} data")
    try:
        if fmt.endswith("prometheus"):
            return counters_from_prometheus(parse_prometheus(text, source), owner, fmt)
        if fmt == "vllm-per-request":
            return counters_from_per_request(text)
        return counters_from_simple_log(text)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


def _read(path: str | Path) -> str:
    """The text of a metrics file; bytes that are not UTF-8 (a program's log may print a
    partial multi-byte token) read as U+FFFD, counters are ASCII."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read metrics file {str(path)!r}: {exc.strerror}") from None


def _detect(text: str, source: str) -> str:
    stripped = "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")
    ).lstrip()
    if stripped.startswith(("{", "[")):
        return "vllm-per-request"
    if re.search(r"^vllm:spec_decode_", text, re.M):
        return "vllm-prometheus"
    if re.search(r"^llamacpp:spec_decode_", text, re.M):
        return "llamacpp-prometheus"
    if SIMPLE_STATS["n_drafted"].search(text) and SIMPLE_STATS["n_accept"].search(text):
        return "llama-speculative-simple"
    if re.search(r"^sglang:", text, re.M):
        return "sglang"
    raise ValueError(
        f"{source}: no speculative-decoding counters found (looked for vllm:spec_decode_*, "
        "llamacpp:spec_decode_* samples, vLLM per-request metrics.speculative_decoding JSON, "
        "llama-speculative-simple's n_drafted/n_accept lines)"
    )
