"""The results file ``csd.results/1``: what ``csd realrun`` measured, next to what ewif predicted.

``realrun.side_by_side`` writes it, ``csd plot calibration`` and the notebooks read it. JSON::

    {"schema": "csd.results/1",
     "device": "cpu (2 cores)", "family": "qwen2.5-coder-1.5b/0.5b+mag",
     "prompts": 20, "max_new_tokens": 64, "decoding": {"temperature": 0.0, "top_p": 1.0},
     "methods": [
       {"name": "AR", "kind": "autoregressive", "tokens_per_s": 5.1, "speedup": 1.0,
        "predicted_speedup": 1.0, "swi": 1.0, "mean_accepted_length": 1.0, "config": {}},
       {"name": "CSD ...", "kind": "csd", "tokens_per_s": 9.3, "speedup": 1.82,
        "predicted_speedup": 1.9, "swi": 1.85, "mean_accepted_length": 3.2,
        "acceptance_by_position": {"measured": [0.8, 0.7], "predicted": [0.82, 0.69]},
        "config": {"models": [...], "K": [[2, 10], [0, 10]], "lenience": 3}}],
     "metadata": {...}}

Definitions (what each number means):

* ``tokens_per_s`` — generated tokens (all prompts) / wall seconds of generation (all prompts).
* ``speedup`` — ``tokens_per_s / tokens_per_s(AR)`` of the autoregressive method *of the same
  run*; ``null`` only in a partial file (interrupted before AR finished).
* ``predicted_speedup`` — ewif's EWIF for the measured α and c (``null`` where ewif has no model,
  e.g. transformers' own baselines).
* ``swi`` — standardized walltime improvement from *counted* passes:
  ``tokens / Σ_i Σ_passes (cost_i + cost_per_token_i · m)`` in units of one target pass.
* ``mean_accepted_length`` — tokens yielded per target step, the bonus (correction) token
  included (vLLM's convention): AR = 1, SD with k draft tokens ≤ k + 1.
* ``prediction_error`` (derived, written for convenience, recomputed on read) —
  ``|predicted_speedup / speedup − 1|``.

The ``metadata`` the reports read is typed by :class:`~ewif.files.run_metadata.RunMetadata`
(:attr:`Results.meta`; docs/files.md lists every key), read from files old and new by one
adapter, :func:`~ewif.files.run_metadata.run_metadata`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ewif.base import validate
from ewif.files.reading import read_data
from ewif.files.run_metadata import RunMetadata, run_metadata

SCHEMA = "csd.results/1"
METHOD_KINDS = ("autoregressive", "sd", "csd", "hf-assisted", "hf-prompt-lookup")
_SPEEDUP_RTOL = 1e-6


@dataclass(frozen=True)
class MethodResult:
    """One decoding method measured in a run (see the module docstring for each field)."""

    name: str
    kind: str
    tokens_per_s: float
    speedup: float | None
    predicted_speedup: float | None = None
    swi: float | None = None
    mean_accepted_length: float | None = None
    acceptance_by_position: dict[str, list[float]] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    tokens: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"method name must be a non-empty string, got {self.name!r}")
        if self.kind not in METHOD_KINDS:
            raise ValueError(
                f"method {self.name!r}: kind must be one of {', '.join(METHOD_KINDS)}, "
                f"got {self.kind!r}"
            )
        validate.cost(f"method {self.name!r}: tokens_per_s", self.tokens_per_s)
        for key in ("speedup", "predicted_speedup", "swi", "seconds"):
            value = getattr(self, key)
            if value is not None:
                validate.cost(f"method {self.name!r}: {key}", value)
        if self.mean_accepted_length is not None:
            mal = validate.cost(
                f"method {self.name!r}: mean_accepted_length", self.mean_accepted_length
            )
            if mal < 1.0:
                raise ValueError(
                    f"method {self.name!r}: mean_accepted_length counts the bonus token, so it "
                    f"must be >= 1, got {mal!r}"
                )
        if self.tokens is not None:
            validate.count(f"method {self.name!r}: tokens", self.tokens)
        if self.acceptance_by_position is not None:
            curves = self.acceptance_by_position
            if not isinstance(curves, Mapping) or "measured" not in curves:
                raise ValueError(
                    f"method {self.name!r}: acceptance_by_position must be a mapping with a "
                    f"'measured' list (and optionally 'predicted'), got {curves!r}"
                )
            for key, curve in curves.items():
                if key not in ("measured", "predicted"):
                    raise ValueError(
                        f"method {self.name!r}: acceptance_by_position keys are 'measured' and "
                        f"'predicted', got {key!r}"
                    )
                validate.probabilities(f"method {self.name!r}: acceptance_by_position.{key}", curve)
        if not isinstance(self.config, Mapping):
            raise ValueError(f"method {self.name!r}: config must be a mapping, got {self.config!r}")

    @property
    def prediction_error(self) -> float | None:
        """``|predicted_speedup / speedup − 1|`` (None if either is unknown or speedup is 0)."""
        if self.predicted_speedup is None or not self.speedup:
            return None
        return abs(self.predicted_speedup / self.speedup - 1.0)

    @property
    def swi_error(self) -> float | None:
        """``|swi / speedup − 1|``: how well counted passes × measured c explain walltime."""
        if self.swi is None or not self.speedup:
            return None
        return abs(self.swi / self.speedup - 1.0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "tokens_per_s": self.tokens_per_s,
            "speedup": self.speedup,
            "predicted_speedup": self.predicted_speedup,
            "swi": self.swi,
            "mean_accepted_length": self.mean_accepted_length,
            "prediction_error": self.prediction_error,
        }
        if self.acceptance_by_position is not None:
            out["acceptance_by_position"] = {
                k: [float(v) for v in curve] for k, curve in self.acceptance_by_position.items()
            }
        if self.tokens is not None:
            out["tokens"] = self.tokens
        if self.seconds is not None:
            out["seconds"] = self.seconds
        out["config"] = _jsonable(self.config)
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = "results") -> MethodResult:
        if not isinstance(data, Mapping):
            raise ValueError(f"{source}: each method must be a mapping, got {data!r}")
        for key in ("name", "kind", "tokens_per_s"):
            if key not in data:
                raise ValueError(f"{source}: method is missing required key {key!r}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known - {"prediction_error"}
        if unknown:
            raise ValueError(
                f"{source}: method {data['name']!r} has unknown keys {sorted(unknown)}"
            )
        kwargs = {k: v for k, v in data.items() if k in known}
        try:
            return cls(**kwargs)
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


@dataclass(frozen=True)
class Results:
    """A whole run: the setting, every method measured side by side, free-form metadata."""

    device: str
    family: str
    prompts: int
    max_new_tokens: int
    decoding: dict[str, float]
    methods: tuple[MethodResult, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate.count("prompts", self.prompts, minimum=0)
        validate.count("max_new_tokens", self.max_new_tokens, minimum=1)
        if not isinstance(self.decoding, Mapping) or set(self.decoding) != {
            "temperature",
            "top_p",
        }:
            raise ValueError(
                f"decoding must be a mapping with exactly 'temperature' and 'top_p', "
                f"got {self.decoding!r}"
            )
        validate.cost("decoding.temperature", self.decoding["temperature"])
        top_p = validate.probability("decoding.top_p", self.decoding["top_p"])
        if top_p == 0.0:
            raise ValueError("decoding.top_p must be in (0, 1], got 0")
        names = [m.name for m in self.methods]
        if len(set(names)) != len(names):
            raise ValueError(f"method names must be distinct, got {names}")
        ar = [m for m in self.methods if m.kind == "autoregressive"]
        if len(ar) > 1:
            raise ValueError(f"at most one autoregressive method per run, got {len(ar)}")
        for m in self.methods:
            if not ar or ar[0].tokens_per_s == 0:
                if m.speedup is not None:
                    raise ValueError(
                        f"method {m.name!r}: speedup must be null when the run has no "
                        "(non-zero) autoregressive baseline"
                    )
                continue
            expected = m.tokens_per_s / ar[0].tokens_per_s
            if m.speedup is None or not math.isclose(m.speedup, expected, rel_tol=_SPEEDUP_RTOL):
                raise ValueError(
                    f"method {m.name!r}: speedup must be tokens_per_s / tokens_per_s(AR) = "
                    f"{expected:.6g}, got {m.speedup!r}"
                )

    @property
    def autoregressive(self) -> MethodResult | None:
        """The run's autoregressive method, the baseline of every speed-up (at most one;
        None when the run has none)."""
        return next((m for m in self.methods if m.kind == "autoregressive"), None)

    @property
    def meta(self) -> RunMetadata:
        """The metadata the reports read, typed (:func:`ewif.files.run_metadata.run_metadata`,
        old files included)."""
        return run_metadata(self.metadata)

    def method(self, name: str) -> MethodResult:
        for m in self.methods:
            if m.name == name:
                return m
        raise ValueError(f"unknown method {name!r}; this run has {[m.name for m in self.methods]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "device": self.device,
            "family": self.family,
            "prompts": self.prompts,
            "max_new_tokens": self.max_new_tokens,
            "decoding": dict(self.decoding),
            "methods": [m.to_dict() for m in self.methods],
            "metadata": _jsonable(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "results") -> Results:
        if not isinstance(data, Mapping):
            raise ValueError(
                f"{source}: expected a mapping at the top level, got {type(data).__name__}"
            )
        if data.get("schema") != SCHEMA:
            raise ValueError(f"{source}: schema must be {SCHEMA!r}, got {data.get('schema')!r}")
        for key in ("device", "family", "prompts", "max_new_tokens", "decoding", "methods"):
            if key not in data:
                raise ValueError(f"{source}: missing required key {key!r}")
        if not isinstance(data["methods"], list):
            raise ValueError(f"{source}: methods must be a list, got {data['methods']!r}")
        methods = tuple(MethodResult.from_dict(m, source) for m in data["methods"])
        try:
            return cls(
                device=str(data["device"]),
                family=str(data["family"]),
                prompts=data["prompts"],
                max_new_tokens=data["max_new_tokens"],
                decoding=dict(data["decoding"])
                if isinstance(data["decoding"], Mapping)
                else data["decoding"],
                methods=methods,
                metadata=dict(data.get("metadata") or {}),
            )
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


def with_speedups(methods: Sequence[MethodResult]) -> tuple[MethodResult, ...]:
    """Fill each method's ``speedup`` from the autoregressive method among them (None if absent)."""
    ar = [m for m in methods if m.kind == "autoregressive"]
    base = ar[0].tokens_per_s if ar else 0.0
    return tuple(replace(m, speedup=(m.tokens_per_s / base) if base else None) for m in methods)


def load(path: str | Path) -> Results:
    """Read and validate a ``csd.results/1`` JSON file."""
    return Results.from_dict(read_data(path, "results file"), source=str(path))


def save(results: Results, path: str | Path) -> Path:
    """Write ``results`` as JSON (the parent directory must exist)."""
    path = Path(path)
    try:
        path.write_text(json.dumps(results.to_dict(), indent=2) + "\n")
    except OSError as exc:
        raise ValueError(f"cannot write results file {str(path)!r}: {exc.strerror}") from None
    return path


def _jsonable(value: Any) -> Any:
    """numpy scalars/arrays and tuples -> plain JSON types (recursively)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return _jsonable(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
