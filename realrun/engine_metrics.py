"""Serving engines' own speculative-decoding counters → acceptance α and a model set
(``csd measure --from-metrics``).

Formats, each read from the engine's source (names and label sets only):

* **vLLM Prometheus exposition** (``/metrics``): counters ``vllm:spec_decode_num_drafts``,
  ``vllm:spec_decode_num_draft_tokens``, ``vllm:spec_decode_num_accepted_tokens`` with labels
  ``model_name``, ``engine``, and ``vllm:spec_decode_num_accepted_tokens_per_pos`` with the
  extra label ``position`` (0-based, one series per position < ``num_speculative_tokens``);
  prometheus_client exposes a counter's samples with the suffix ``_total``. Source:
  vllm-project/vllm vllm/v1/spec_decode/metrics.py @ ee4ceaae5953d367d8edd2132fd86d6c42506e1e
  (``SpecDecodingProm``: ``observe_draft`` adds 1 to the per-position counter of every
  accepted position) and vllm/v1/metrics/loggers.py @ 005a810bc40faa25b8870fbc8559c3462581eee3
  (``labelnames = ["model_name", "engine"]``).
* **vLLM per-request metrics** (``--per-request-spec-decode-metrics summary|detailed``,
  vLLM PR #48915): a response's ``metrics.speculative_decoding`` object with
  ``num_spec_steps``, ``num_draft_tokens``, ``num_accepted_draft_tokens``, ``num_spec_tokens``
  and ``acceptance_histogram`` (index ``j``: verify steps that accepted exactly ``j`` draft
  tokens). Read as a JSON response, a list of them or JSON Lines; the requests add up.
* **llama.cpp ``llama-server`` /metrics** (``--metrics``): ``llamacpp:spec_decode_num_drafts_total``
  (verification steps), ``llamacpp:spec_decode_num_draft_tokens_total``,
  ``llamacpp:spec_decode_num_accepted_tokens_total`` and
  ``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="i"}`` (0-based), from
  tools/server/server-task.cpp and server-context.cpp of the llama.cpp vendored in
  llama-cpp-python 0.3.36 (ggml-org/llama.cpp @ 0c1e57098bba43ac29e6e3b677cdceebdd22334f).
  The three totals are printed as C++ doubles (6 significant digits: ``1.23457e+06``), the
  per-position counts as integers, so sums are checked to that precision.
* **llama.cpp ``llama-speculative-simple``'s printed statistics** (examples/speculative-simple/
  speculative-simple.cpp, same commit): ``n_draft`` (the draft length k), ``n_predict``,
  ``n_drafted``, ``n_accept``; each verify step yields its accepted tokens plus one, so the
  steps are ``n_predict − n_accept``. No per-position counts: α solves
  ``n_accept / n_drafted = Σ_{i=1..k} α^i / k`` (:func:`iid_alpha`, drafts of k i.i.d.
  tokens), without an interval.
* **SGLang** exports no comparable counters: only the gauges ``sglang:spec_accept_length`` and
  ``sglang:spec_accept_rate``, means over its last logging interval (sgl-project/sglang
  python/sglang/srt/metrics/collector.py @ 00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538), from
  which neither α by position nor an interval can be formed: rejected with that message.

The math. A verify step reviews a draft of (up to) ``k`` tokens left to right and stops at the
first rejection. Let ``A_0`` be the number of steps and ``A_i`` (``i = 1..k``) the steps whose
first ``i`` draft tokens were all accepted (the per-position counter of 0-based position
``i − 1``). Position ``i`` is reviewed in the ``A_{i−1}`` steps that reached it, so the
conditional acceptance there is ``α_i = A_i / A_{i−1}``, a binomial proportion with its Wilson
interval (:func:`simulate.stats.wilson_interval`). Under the Bernoulli model (one α at every
position) the likelihood of all steps factorises over the reviewed positions, so the maximum
likelihood estimate is the pooled proportion ``α̂ = Σ_i A_i / Σ_i A_{i−1}`` (accepted tokens
over reviewed tokens, ``Σ_i A_{i−1} = A_0 + accepted − A_k``), with the Wilson interval of
those totals. The engines' own "acceptance rate" ``accepted / drafted`` is not α: it also
counts the draft tokens behind a rejection, which are never reviewed.

When some drafts are shorter than ``k`` (``draft_tokens < k·A_0``: an n-gram without a
match, a draft stopped by a minimum probability, the end of a generation) ``A_{i−1}``
overcounts the steps that drafted position ``i``, so ``α_i`` and ``α̂`` are lower bounds;
the output says so.

Consistency (a ``ValueError`` naming the counter otherwise): every counter finite,
non-negative and integral; ``accepted ≤ draft_tokens ≤ k·A_0``; the per-position counts
present for every position ``0..k−1``, non-increasing, ``A_1 ≤ A_0`` and summing to the
accepted total; of two scrapes, no counter smaller in the later one.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ewif.base import validate
from ewif.files.model_set import ModelSet

if TYPE_CHECKING:
    from ewif.files.batch_costs import BatchCosts

#: ``--engine`` choices (``auto``: recognised by content).
ENGINES = ("auto", "vllm", "llama.cpp", "sglang")
#: The Prometheus counter names shared by vLLM (prefix ``vllm:``) and llama.cpp
#: (``llamacpp:``); samples may carry the ``_total`` suffix.
DRAFTS = "spec_decode_num_drafts"
DRAFT_TOKENS = "spec_decode_num_draft_tokens"
ACCEPTED = "spec_decode_num_accepted_tokens"
PER_POSITION = "spec_decode_num_accepted_tokens_per_pos"
PREFIX = {"vllm": "vllm:", "llama.cpp": "llamacpp:"}
#: llama-speculative-simple's statistics lines (``LOG_INF("n_drafted = %d\n", ...)``).
SIMPLE_STATS = {
    key: re.compile(rf"\b{key}\s*=\s*(\d+)")
    for key in ("n_draft", "n_predict", "n_drafted", "n_accept")
}
SGLANG_REJECTED = (
    "SGLang exports no cumulative drafted/accepted counters and no per-position counters, only "
    "the gauges sglang:spec_accept_length and sglang:spec_accept_rate (means over its last "
    "logging interval; python/sglang/srt/metrics/collector.py): α by position and its "
    "interval cannot be formed from them. Measure α with csd measure on the same models, or "
    "serve with vLLM or llama-server to read their counters"
)
#: Relative precision of llama.cpp's printed totals (C++ ``<<`` of a double: 6 digits).
_PRINTED = 5e-6


@dataclass(frozen=True)
class SpecCounters:
    """Speculative-decoding totals of one engine run (module docstring: ``A_0 = drafts``,
    ``per_position = (A_1, ..., A_k)``; None when the format has none)."""

    format: str
    drafts: int
    draft_tokens: int
    accepted: int
    k: int
    per_position: tuple[int, ...] | None = None
    model_name: str | None = None

    def __post_init__(self) -> None:
        name = f"{self.format} counters"
        for key in ("drafts", "draft_tokens", "accepted", "k"):
            object.__setattr__(self, key, _count(f"{name}: {key}", getattr(self, key)))
        if self.k < 1 and self.draft_tokens > 0:
            raise ValueError(f"{name}: the draft length k must be >= 1, got {self.k}")
        if self.accepted > self.draft_tokens:
            raise ValueError(
                f"{name}: accepted tokens ({self.accepted}) exceed drafted tokens "
                f"({self.draft_tokens})"
            )
        if self.draft_tokens > self.k * self.drafts * (1 + _PRINTED):
            raise ValueError(
                f"{name}: {self.draft_tokens} drafted tokens exceed k·drafts = "
                f"{self.k}·{self.drafts} (at most k tokens per draft)"
            )
        if self.per_position is None:
            return
        a = tuple(
            _count(f"{name}: accepted at position {i}", v) for i, v in enumerate(self.per_position)
        )
        object.__setattr__(self, "per_position", a)
        if len(a) != self.k:
            raise ValueError(f"{name}: {len(a)} per-position counts for k = {self.k} positions")
        if a and a[0] > self.drafts:
            raise ValueError(
                f"{name}: {a[0]} steps accepted position 0 but only {self.drafts} drafts were "
                "counted"
            )
        for i in range(1, len(a)):
            if a[i] > a[i - 1]:
                raise ValueError(
                    f"{name}: position {i} accepted more often ({a[i]}) than position {i - 1} "
                    f"({a[i - 1]}); a position is reviewed only after the one before it is "
                    "accepted"
                )
        if abs(sum(a) - self.accepted) > _PRINTED * self.accepted:
            raise ValueError(
                f"{name}: the per-position counts sum to {sum(a)}, not the accepted total "
                f"{self.accepted}"
            )

    @property
    def empty(self) -> bool:
        """Nothing drafted yet (a scrape of a fresh server)."""
        return self.drafts == 0 and self.draft_tokens == 0

    def minus(self, before: SpecCounters) -> SpecCounters:
        """The counts between an earlier scrape ``before`` and this one."""
        if before.empty and before.per_position is None and before.format == self.format:
            before = replace(
                before, k=self.k, per_position=(0,) * self.k if self.per_position else None
            )
        if before.format != self.format or before.k != self.k:
            raise ValueError(
                f"two scrapes must come from the same engine and draft length, got "
                f"{before.format} k={before.k} and {self.format} k={self.k}"
            )
        pairs = {
            "drafts": (before.drafts, self.drafts),
            "draft_tokens": (before.draft_tokens, self.draft_tokens),
            "accepted": (before.accepted, self.accepted),
        }
        if self.per_position is not None and before.per_position is not None:
            pairs |= {
                f"accepted at position {i}": (b, a)
                for i, (b, a) in enumerate(zip(before.per_position, self.per_position, strict=True))
            }
        for key, (b, a) in pairs.items():
            if a < b:
                raise ValueError(
                    f"counter {key} decreased between the two scrapes ({b} → {a}): give the "
                    "earlier scrape first, from one server run (a restart resets the counters)"
                )
        per = None
        if self.per_position is not None and before.per_position is not None:
            per = tuple(a - b for b, a in zip(before.per_position, self.per_position, strict=True))
        return replace(
            self,
            drafts=self.drafts - before.drafts,
            draft_tokens=self.draft_tokens - before.draft_tokens,
            accepted=self.accepted - before.accepted,
            per_position=per,
        )


@dataclass(frozen=True)
class PositionAlpha:
    """Conditional acceptance at 1-based draft position ``position``: ``accepted`` of
    ``reviewed`` steps, with the Wilson interval ``[low, high]``."""

    position: int
    accepted: int
    reviewed: int
    alpha: float
    low: float
    high: float


@dataclass(frozen=True)
class Acceptance:
    """α read from a run's counters (module docstring): the pooled estimate with its interval
    (None for the moment estimate of llama-speculative-simple), by position when counted."""

    counters: SpecCounters
    alpha: float
    low: float | None
    high: float | None
    reviewed: int | None
    level: float
    method: str
    by_position: tuple[PositionAlpha, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        c = self.counters
        return {
            "format": c.format,
            "model_name": c.model_name,
            "counters": {
                "drafts": c.drafts,
                "draft_tokens": c.draft_tokens,
                "accepted": c.accepted,
                "k": c.k,
                "accepted_per_position": None if c.per_position is None else list(c.per_position),
            },
            "alpha": self.alpha,
            "interval": None if self.low is None else [self.low, self.high],
            "level": self.level,
            "reviewed": self.reviewed,
            "method": self.method,
            "engine_acceptance_rate": c.accepted / c.draft_tokens if c.draft_tokens else None,
            "by_position": [
                {
                    "position": p.position,
                    "accepted": p.accepted,
                    "reviewed": p.reviewed,
                    "alpha": p.alpha,
                    "interval": [p.low, p.high],
                }
                for p in self.by_position
            ],
            "notes": list(self.notes),
        }


def format_acceptance(acc: Acceptance, files: Sequence[str], names: Sequence[str]) -> str:
    """The human table of ``csd measure --from-metrics``."""
    from ewif.base.text_table import table

    c = acc.counters
    pct = f"{100 * acc.level:g}%"
    lines = [
        f"csd measure --from-metrics {' '.join(map(str, files))} ({c.format}"
        + (f", model {c.model_name}" if c.model_name else "")
        + f"): {names[0]} reviewing {names[1]}",
        f"{c.drafts:,} verify steps, {c.draft_tokens:,} draft tokens (k = {c.k}), "
        f"{c.accepted:,} accepted; the engine's acceptance rate accepted/drafted = "
        f"{c.accepted / c.draft_tokens:.4f} is not α (it counts unreviewed tokens)",
    ]
    if acc.by_position:
        lines += [
            "",
            table(
                ["position", "accepted", "reviewed", "α (conditional)", f"{pct} Wilson"],
                [
                    [
                        p.position,
                        f"{p.accepted:,}",
                        f"{p.reviewed:,}",
                        f"{p.alpha:.4f}",
                        f"[{p.low:.4f}, {p.high:.4f}]",
                    ]
                    for p in acc.by_position
                ],
            ),
            "",
            f"α = {acc.alpha:.4f}  {pct} Wilson [{acc.low:.4f}, {acc.high:.4f}]  ({acc.method}: "
            f"{c.accepted:,} accepted of {acc.reviewed:,} reviewed draft tokens)",
        ]
    else:
        lines.append(f"α = {acc.alpha:.4f}  ({acc.method})")
    lines += [f"note: {n}" for n in acc.notes]
    return "\n".join(lines)


def iid_alpha(fraction: float, k: int) -> float:
    """α of i.i.d. acceptance whose drafts of ``k`` tokens have ``fraction`` of their tokens
    accepted on average: solves ``α(1 − α^k) / ((1 − α) k) = fraction`` (bisection)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")

    def accepted(a: float) -> float:
        return sum(a**i for i in range(1, k + 1)) / k

    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if accepted(mid) < fraction else (lo, mid)
    return (lo + hi) / 2


def acceptance(counters: SpecCounters, level: float = 0.95) -> Acceptance:
    """α from ``counters`` (module docstring), Wilson intervals at ``level``."""
    from simulate.stats import wilson_interval

    level = validate.probability("level", level)
    c = counters
    if c.drafts == 0 or c.draft_tokens == 0:
        raise ValueError(
            f"{c.format} counters: no verify step or draft token was counted (drafts = "
            f"{c.drafts}, draft tokens = {c.draft_tokens}): nothing to read"
        )
    notes = []
    if c.draft_tokens < c.k * c.drafts * (1 - _PRINTED):
        notes.append(
            f"{c.k * c.drafts - c.draft_tokens} of the k·drafts = {c.k * c.drafts} draft "
            "positions were never drafted (drafts shorter than k): the per-position and pooled "
            "α are lower bounds"
        )
    if c.per_position is None:
        alpha = iid_alpha(c.accepted / c.draft_tokens, c.k)
        notes.append(
            "no per-position counts in this format: α from the accepted fraction of drafts of "
            "k i.i.d. tokens, without an interval"
        )
        method = "moment: accepted/drafted = Σα^i/k"
        return Acceptance(c, alpha, None, None, None, level, method, (), tuple(notes))
    reached = np.array([c.drafts, *c.per_position[:-1]], dtype=np.int64)
    ok = np.array(c.per_position, dtype=np.int64)
    low, high = wilson_interval(ok, reached, level)
    by_position = tuple(
        PositionAlpha(i + 1, int(ok[i]), int(reached[i]), ok[i] / reached[i], low[i], high[i])
        for i in range(c.k)
        if reached[i] > 0  # positions past the last reached one carry no evidence
    )
    total_ok, total = int(ok.sum()), int(reached.sum())
    lo, hi = wilson_interval(total_ok, total, level)
    method = "pooled per-position counts (Bernoulli maximum likelihood)"
    return Acceptance(
        c, total_ok / total, float(lo), float(hi), total, level, method, by_position, tuple(notes)
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
    return _added(parsed)


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
            return _from_prometheus(parse_prometheus(text, source), owner, fmt)
        if fmt == "vllm-per-request":
            return _from_per_request(text)
        return _from_simple_log(text)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None


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


def parse_cost_curves(specs: Sequence[str]) -> dict[str, list[float]]:
    """``--cost-curve NAME=C1,C2,...`` (repeatable): model ``NAME``'s pass cost over
    ``m = 1, 2, ...`` positions in units of the target's one-position pass (the target's
    curve starts at 1; beyond the last point the curve continues as :mod:`ewif.kernel.pass_cost`
    says). Each NAME once; every value a finite number >= 0."""
    given = validate.name_values("--cost-curve", specs, "NAME=C1,C2,... (costs for m = 1, 2, ...)")
    out: dict[str, list[float]] = {}
    for name, values in given.items():
        curve = validate.comma_separated(f"--cost-curve {name}", values, float, "costs")
        out[name] = validate.costs(f"--cost-curve {name}", curve).tolist()
    return out


def curves_from_file(path: str | Path, names: Sequence[str]) -> tuple[list[list[float]], dict]:
    """The measured cost curves of ``names`` (target first) from a model-set file whose target
    is ``names[0]``, and what the file says of them (timing, catch-up flags, batched cost
    curves)."""
    from ewif.files import model_set as model_io

    ms = model_io.load(path)
    if ms.cost_curve is None:
        raise ValueError(f"{path}: the model set has no cost_curve (measured pass costs)")
    if ms.models[0] != names[0]:
        raise ValueError(
            f"{path}: its target is {ms.models[0]!r}, not {names[0]!r} (costs are in units of "
            "the target's pass)"
        )
    idx = [ms.index(n) for n in names]
    timing = ms.metadata.get("timing", {})
    extra: dict[str, Any] = {"timing": {n: timing[n] for n in names if n in timing}}
    if ms.catch_up is not None:
        extra["catch_up"] = [ms.catch_up[i] for i in idx]
    if ms.batch_costs is not None:
        from ewif.files.batch_costs import BatchCosts

        extra["batch_costs"] = BatchCosts(
            {b: tuple(c[i] for i in idx) for b, c in ms.batch_costs.curves.items()}
        )
    return [ms.cost_curve[i].tolist() for i in idx], extra


def model_set(
    acc: Acceptance,
    names: Sequence[str],
    curves: Sequence[Sequence[float]],
    *,
    catch_up: Sequence[bool] | None = None,
    batch_costs: BatchCosts | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ModelSet:
    """The model set of target ``names[0]`` and drafter ``names[1]``: α at lenience 1 and by
    position from ``acc``, the pass costs ``curves`` (one per name) and, when given, their
    catch-up flags and batched cost curves."""
    names = tuple(names)
    if len(names) != 2:
        raise ValueError(
            f"an engine's counters describe one target and one drafter, got {list(names)}"
        )
    alpha = np.full((2, 2), np.nan)
    alpha[0, 1] = acc.alpha
    by_position = {(0, 1): np.array([p.alpha for p in acc.by_position])} if acc.by_position else {}
    meta = {"source": "engine metrics (csd measure --from-metrics)", **(metadata or {})}
    return ModelSet(
        models=names,
        cost=np.array([float(c[0]) for c in curves]),
        cost_per_token=np.zeros(2),
        alpha={1.0: alpha},
        alpha_by_position=by_position,
        metadata={**meta, "engine_metrics": acc.to_dict()},
        cost_curve=tuple(np.asarray(c, dtype=float) for c in curves),
        catch_up=None if catch_up is None else tuple(catch_up),
        batch_costs=batch_costs,
    )


def _read(path: str | Path) -> str:
    """The text of a metrics file; bytes that are not UTF-8 (a program's log may print a
    partial multi-byte token) read as U+FFFD, counters are ASCII."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"cannot read metrics file {str(path)!r}: {exc.strerror}") from None


def _detect(text: str, source: str) -> str:
    stripped = text.lstrip()
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


def _from_prometheus(samples: list[Sample], engine: str, fmt: str) -> SpecCounters:
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
        _count(s.name, s.value)
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


def _from_per_request(text: str) -> SpecCounters:
    try:
        data = json.loads(text)
        objects = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        objects = []
        for n, line in enumerate(text.splitlines(), start=1):
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
            _count(f"{where}: acceptance_histogram[{j}]", v)
            for j, v in enumerate(_list(r, "acceptance_histogram", where))
        ]
        s = _count(f"{where}: num_spec_steps", r.get("num_spec_steps"))
        a = _count(f"{where}: num_accepted_draft_tokens", r.get("num_accepted_draft_tokens"))
        if sum(h) != s or sum(j * v for j, v in enumerate(h)) != a:
            raise ValueError(
                f"{where}: acceptance_histogram {h} disagrees with num_spec_steps {s} and "
                f"num_accepted_draft_tokens {a}"
            )
        steps, accepted = steps + s, accepted + a
        tokens += _count(f"{where}: num_draft_tokens", r.get("num_draft_tokens"))
        spec_tokens = _count(f"{where}: num_spec_tokens", r.get("num_spec_tokens", len(h) - 1))
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


def _from_simple_log(text: str) -> SpecCounters:
    found = {key: [int(v) for v in r.findall(text)] for key, r in SIMPLE_STATS.items()}
    runs = len(found["n_drafted"])
    if any(len(v) != runs for v in found.values()):
        raise ValueError(
            "every run's statistics need n_draft, n_predict, n_drafted and n_accept; found "
            + ", ".join(f"{k} {len(v)}x" for k, v in found.items())
        )
    ks = set(found["n_draft"])
    if len(ks) > 1:
        raise ValueError(f"the runs used different draft lengths n_draft {sorted(ks)}")
    steps = sum(p - a for p, a in zip(found["n_predict"], found["n_accept"], strict=True))
    return SpecCounters(
        "llama-speculative-simple",
        drafts=steps,
        draft_tokens=sum(found["n_drafted"]),
        accepted=sum(found["n_accept"]),
        k=ks.pop(),
    )


def _added(parts: Sequence[SpecCounters]) -> SpecCounters:
    first = parts[0]
    if len(parts) == 1:
        return first
    if len({c.k for c in parts}) > 1:
        raise ValueError(f"the files used different draft lengths {sorted({c.k for c in parts})}")
    per = None
    if all(c.per_position is not None for c in parts):
        per = tuple(int(sum(v)) for v in zip(*(c.per_position for c in parts), strict=True))
    return replace(
        first,
        drafts=sum(c.drafts for c in parts),
        draft_tokens=sum(c.draft_tokens for c in parts),
        accepted=sum(c.accepted for c in parts),
        per_position=per,
    )


def _count(name: str, value: object) -> int:
    """A counter: a finite, non-negative, integral number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a count (a non-negative integer), got {value!r}")
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise ValueError(f"{name} must be a count (a non-negative integer), got {value!r}")
    return int(value)


def _list(record: Mapping, key: str, where: str) -> list:
    value = record.get(key)
    if not isinstance(value, list):
        raise ValueError(f"{where}: {key} must be a list, got {value!r}")
    return value
