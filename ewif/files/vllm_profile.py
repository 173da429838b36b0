"""vLLM's own step costs and n-gram behaviour, measured through the engine (``csd.vllm-profile/1``):
what :mod:`ewif.predict.batch` prices vLLM's speculative decoding with (``drafting="vllm"``).

Costs are milliseconds of vLLM engine steps at batch size ``B`` (running requests decoded in
lock-step), measured from vLLM's own per-step log (``benchmarks/vllm_profile.py``):

* ``target_pass[B][T]``: the target's step over ``B`` rows and ``T`` positions in all
  (``T = B`` without speculation; ``Σ_rows (1 + k_row)`` when verifying drafts, every
  position with its logit row, and the rejection sampler);
* ``drafter_pass[B]``: one pass of the draft model over ``B`` rows of one position with one
  logit row each (its second to ``k``-th drafting pass);
* ``drafter_first_pass[B][m]``: the draft model's first pass of a step, ``B`` rows of ``m``
  positions (``m = k + 2``: the target's ``k + 1`` positions and the sampled token, rejected
  ones included) with one logit row per row;
* ``overhead[method][B][k]``: the host time per step outside the worker (scheduling,
  bookkeeping, output handling) for ``"ar"`` (``k = 0``), ``"ngram"`` and ``"draft_model"``.

A cost table is read only where it was measured, except ``target_pass`` between two measured
``T`` of one ``B`` (linear: nothing is assumed about monotonicity, and no ``B`` or ``T`` beyond
the measured ones is priced). ``ngram`` is vLLM's n-gram proposer as measured by its own
counters: ``match_rate`` ``q`` (the fraction of a row's decode steps that carried a draft; no
match, no draft) and the conditional acceptance by draft position ``α_1, α_2, …`` (beyond the
last, the last), so a row drafting ``k`` accepts ``Σ_{i=1}^{k} Π_{j≤i} α_j`` tokens on average.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ewif.base import validate

SCHEMA = "csd.vllm-profile/1"
METHODS = ("ar", "ngram", "draft_model")


@dataclass(frozen=True)
class NgramBehaviour:
    """vLLM's n-gram proposer on the measured prompts (module docstring)."""

    match_rate: float
    alpha_by_position: tuple[float, ...]
    prompt_lookup_min: int = 1
    prompt_lookup_max: int = 4

    def __post_init__(self) -> None:
        object.__setattr__(self, "match_rate", validate.probability("match_rate", self.match_rate))
        alphas = tuple(
            validate.probability(f"alpha_by_position[{i}]", a)
            for i, a in enumerate(self.alpha_by_position)
        )
        if not alphas:
            raise ValueError("alpha_by_position must hold at least one acceptance rate")
        object.__setattr__(self, "alpha_by_position", alphas)
        low = validate.count("prompt_lookup_min", self.prompt_lookup_min, minimum=1)
        high = validate.count("prompt_lookup_max", self.prompt_lookup_max, minimum=1)
        if low > high:
            raise ValueError(f"prompt_lookup_min {low} exceeds prompt_lookup_max {high}")

    def accepted(self, k: int) -> float:
        """Expected accepted tokens of a draft of ``k``: ``Σ_{i=1}^{k} Π_{j≤i} α_j``."""
        total, run = 0.0, 1.0
        for i in range(validate.count("k", k)):
            run *= self.alpha_by_position[min(i, len(self.alpha_by_position) - 1)]
            total += run
        return total


@dataclass(frozen=True)
class VllmProfile:
    """vLLM's measured step costs (milliseconds) and n-gram behaviour (module docstring)."""

    target: str
    target_pass: dict[int, dict[int, float]]
    overhead: dict[str, dict[int, dict[int, float]]]
    drafter: str | None = None
    drafter_pass: dict[int, float] | None = None
    drafter_first_pass: dict[int, dict[int, float]] | None = None
    ngram: NgramBehaviour | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_pass", _table("target_pass", self.target_pass, 1))
        if set(self.overhead) - set(METHODS):
            raise ValueError(f"overhead methods must be among {METHODS}, got {list(self.overhead)}")
        clean = {m: _table(f"overhead[{m}]", t, 0) for m, t in self.overhead.items()}
        object.__setattr__(self, "overhead", clean)
        if (self.drafter_pass is None) != (self.drafter_first_pass is None):
            raise ValueError("drafter_pass and drafter_first_pass go together (or neither)")
        if self.drafter_pass is not None:
            passes = {
                validate.count("drafter_pass batch size", b, minimum=1): validate.cost(
                    f"drafter_pass[{b}]", c
                )
                for b, c in self.drafter_pass.items()
            }
            object.__setattr__(self, "drafter_pass", dict(sorted(passes.items())))
            first = _table("drafter_first_pass", self.drafter_first_pass, 2)
            object.__setattr__(self, "drafter_first_pass", first)

    @property
    def batch_sizes(self) -> list[int]:
        return sorted(self.target_pass)

    def target_at(self, batch: int, positions: float) -> float:
        """``target_pass[B][T]``, linear between the two measured ``T`` around ``positions``."""
        table = _row("target_pass", self.target_pass, batch)
        points = sorted(table)
        t = float(positions)
        if t in table:
            return table[int(t)]
        if not points[0] <= t <= points[-1]:
            raise ValueError(
                f"target_pass[{batch}] is measured for {points[0]}..{points[-1]} positions, "
                f"not {positions:g}"
            )
        lo = max(p for p in points if p < t)
        hi = min(p for p in points if p > t)
        return table[lo] + (table[hi] - table[lo]) * (t - lo) / (hi - lo)

    def overhead_at(self, method: str, batch: int, k: int) -> float:
        """``o(B, k)`` of ``method`` (host time per step outside the worker)."""
        if method not in self.overhead:
            raise ValueError(f"the profile has no {method} overhead (has {list(self.overhead)})")
        return _at(f"overhead[{method}]", self.overhead[method], batch, k)

    def ar_step(self, batch: int) -> float:
        """A step of the target alone: ``c_0(B, B) + o_ar(B)``."""
        return self.target_at(batch, batch) + self.overhead_at("ar", batch, 0)

    def draft_model_step(self, batch: int, k: int) -> float:
        """A draft-model step of draft length ``k`` (``k = 0``: a schedule's K = 0, the
        drafter's first pass still runs): ``c_0(B, B(k+1)) + c_d1(B, k+2) + max(k−1, 0)·
        c_d1(B, 1) + o_dm(B, k)``."""
        k = validate.count("k", k)
        if self.drafter_pass is None or self.drafter_first_pass is None:
            raise ValueError("the profile has no draft-model costs")
        if batch not in self.drafter_pass:
            raise ValueError(
                f"drafter_pass is measured at {sorted(self.drafter_pass)}, not {batch}"
            )
        later = self.drafter_pass[batch]
        first = _at("drafter_first_pass", self.drafter_first_pass, batch, k + 2)
        target = self.target_at(batch, batch * (k + 1))
        return target + first + max(k - 1, 0) * later + self.overhead_at("draft_model", batch, k)

    def ngram_step(self, batch: int, k: int) -> float:
        """An n-gram step of draft length ``k``: ``Σ_j C(B, j) q^j (1−q)^{B−j}·c_0(B, B + j·k)
        + o_ng(B, k)`` (``j`` rows found a match and carry ``k`` draft tokens)."""
        k = validate.count("k", k, minimum=1)
        if self.ngram is None:
            raise ValueError("the profile has no n-gram behaviour")
        q, b = self.ngram.match_rate, validate.count("batch", batch, minimum=1)
        target = sum(
            math.comb(b, j) * q**j * (1 - q) ** (b - j) * self.target_at(b, b + j * k)
            for j in range(b + 1)
            if (q > 0 or j == 0) and (q < 1 or j == b)
        )
        return target + self.overhead_at("ngram", b, k)

    def k_max(self, method: str) -> int:
        """The largest draft length priced at every measured batch size for ``method``."""
        table = self.overhead.get(method)
        if not table:
            return 0
        return min(max(row) for row in table.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA, "target": self.target, "drafter": self.drafter}
        out["target_pass"] = _out(self.target_pass)
        out["overhead"] = {m: _out(t) for m, t in self.overhead.items()}
        if self.drafter_pass is not None and self.drafter_first_pass is not None:
            out["drafter_pass"] = {str(b): c for b, c in self.drafter_pass.items()}
            out["drafter_first_pass"] = _out(self.drafter_first_pass)
        if self.ngram is not None:
            out["ngram"] = {
                "match_rate": self.ngram.match_rate,
                "alpha_by_position": list(self.ngram.alpha_by_position),
                "prompt_lookup_min": self.ngram.prompt_lookup_min,
                "prompt_lookup_max": self.ngram.prompt_lookup_max,
            }
        out["metadata"] = self.metadata
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = "vLLM profile") -> VllmProfile:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            got = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
            raise ValueError(f"{source}: not a {SCHEMA} file (schema {got!r})")
        known = {"schema", "target", "drafter", "target_pass", "overhead", "drafter_pass"}
        known |= {"drafter_first_pass", "ngram", "metadata"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{source}: unknown keys {unknown}")
        try:
            ngram = data.get("ngram")
            return cls(
                target=str(data["target"]),
                drafter=None if data.get("drafter") is None else str(data["drafter"]),
                target_pass=_in("target_pass", data["target_pass"]),
                overhead={
                    m: _in(f"overhead[{m}]", t)
                    for m, t in _mapping("overhead", data["overhead"]).items()
                },
                drafter_pass=None
                if data.get("drafter_pass") is None
                else validate.keyed(
                    "drafter_pass", data["drafter_pass"], int, "a batch size", "milliseconds"
                ),
                drafter_first_pass=None
                if data.get("drafter_first_pass") is None
                else _in("drafter_first_pass", data["drafter_first_pass"]),
                ngram=None if ngram is None else NgramBehaviour(**_mapping("ngram", ngram)),
                metadata=dict(data.get("metadata") or {}),
            )
        except KeyError as exc:
            raise ValueError(f"{source}: missing key {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{source}: {exc}") from None


def load(path: str | Path) -> VllmProfile:
    """A ``csd.vllm-profile/1`` file (one-line ``ValueError`` otherwise)."""
    from ewif.files.reading import read_data

    return VllmProfile.from_dict(read_data(path, "vLLM profile"), str(path))


def save(profile: VllmProfile, path: str | Path) -> Path:
    import json

    path = Path(path)
    path.write_text(json.dumps(profile.to_dict(), indent=1) + "\n")
    return path


def _mapping(name: str, data: Any) -> dict:
    if not isinstance(data, Mapping):
        raise ValueError(f"{name} must be a mapping, got {validate.shown(data)}")
    return dict(data)


def _in(name: str, data: Any) -> dict[int, dict[int, float]]:
    outer = validate.keyed(name, data, int, "a batch size (an integer >= 1)", "tables")
    return {
        b: validate.keyed(f"{name}[{b}]", row, int, "an integer", "milliseconds")  # type: ignore[misc]
        for b, row in outer.items()
    }


def _table(name: str, data: Any, minimum: int) -> dict[int, dict[int, float]]:
    """Checked ``{B: {x: ms}}`` (``x >= minimum``), sorted, no empty row."""
    if not isinstance(data, Mapping) or not data:
        raise ValueError(f"{name} must map at least one batch size to its costs")
    out = {}
    for b, row in data.items():
        batch = validate.count(f"{name} batch size", b, minimum=1)
        if not isinstance(row, Mapping) or not row:
            raise ValueError(f"{name}[{batch}] must map at least one size to milliseconds")
        out[batch] = {
            validate.count(f"{name}[{batch}] key", x, minimum=minimum): validate.cost(
                f"{name}[{batch}][{x}]", c
            )
            for x, c in sorted(row.items(), key=lambda kv: int(kv[0]))
        }
    return dict(sorted(out.items()))


def _row(name: str, table: dict[int, dict[int, float]], batch: int) -> dict[int, float]:
    if batch not in table:
        raise ValueError(f"{name} is measured at batch sizes {sorted(table)}, not {batch}")
    return table[batch]


def _at(name: str, table: dict[int, dict[int, float]], batch: int, x: int) -> float:
    row = _row(name, table, batch)
    if x not in row:
        raise ValueError(f"{name}[{batch}] is measured at {sorted(row)}, not {x}")
    return row[x]


def _out(table: dict[int, dict[int, float]]) -> dict[str, dict[str, float]]:
    return {str(b): {str(x): c for x, c in row.items()} for b, row in table.items()}
