"""vLLM's step costs and n-gram behaviour from vLLM's own step log and per-request metrics:
the measurements behind a :class:`ewif.files.vllm_profile.VllmProfile`.

Every engine step of a synchronized round (:mod:`realrun.vllm_rounds`) carries its shape — the
running rows ``B`` and the positions ``T = Σ (1 + k_row)`` the target processed — and the
worker's elapsed time. A *cell* is every decode-only step of one shape with all ``B`` rows
running (the round's tail, where rows have finished, is left out). The target's cost
``c_0(B, T)`` is a cell of a server that runs no drafter model (without speculation ``T = B``;
with n-gram speculation, rows of ``1`` or ``1 + k``); a draft-model server's cell at ``T =
B(k+1)`` is the whole step ``c_0(B, B(k+1)) + (the drafter's k passes)``, so the drafter's
share is that cell minus the target's. The drafter's one-position pass ``c_d1(B, 1)`` is the
drafter model served alone without speculation (the same pass: ``B`` rows, one position and
one logit row each); its first (catch-up) pass is then the remainder ``drafter share −
(k − 1)·c_d1(B, 1)``.

n-gram behaviour from the per-request ``detailed`` arrays (``per_step_drafted``,
``per_step_accepted``; one entry per step that carried a draft): position ``i`` is reviewed in
a step that drafted ``≥ i`` tokens and accepted ``≥ i − 1``, accepted when it accepted ``≥ i``,
so ``α_i = accepted_i / reviewed_i`` exactly, short drafts included; the match rate ``q`` is
the steps with a draft over all row-steps of decoding (``Σ`` generation requests of the decode
steps).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from realrun.vllm_rounds import Round, Rounds


@dataclass
class Cells:
    """Elapsed milliseconds of full decode steps by ``(B, T)``, and host overhead by
    ``(B, k)``."""

    steps: dict[tuple[int, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    host: dict[tuple[int, int], list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, rounds: Rounds, k: int) -> None:
        """The full decode steps of ``rounds`` (batch ``B``, draft length ``k``) and each
        round's host milliseconds per decode step."""
        for r in rounds.rounds:
            for s in r.decode_steps:
                if s.generation_requests == r.batch:
                    self.steps[(r.batch, s.generation_tokens)].append(s.elapsed_ms)
            self.host[(r.batch, k)].append(host_ms_per_step(r))

    def mean(self, batch: int, positions: int) -> float:
        return float(np.mean(self.steps[(batch, positions)]))

    def table(self, minimum: int = 3) -> dict[int, dict[int, float]]:
        """``{B: {T: mean ms}}`` of the cells with at least ``minimum`` steps."""
        out: dict[int, dict[int, float]] = defaultdict(dict)
        for (b, t), v in sorted(self.steps.items()):
            if len(v) >= minimum:
                out[b][t] = float(np.mean(v))
        return dict(out)

    def host_table(self) -> dict[int, dict[int, float]]:
        out: dict[int, dict[int, float]] = defaultdict(dict)
        for (b, k), v in sorted(self.host.items()):
            out[b][k] = float(np.mean(v))
        return dict(out)

    def summary(self) -> dict[str, dict[str, list[float]]]:
        """Per cell: [steps, mean, median, standard deviation] (ms), for the record."""
        out: dict[str, dict[str, list[float]]] = defaultdict(dict)
        for (b, t), v in sorted(self.steps.items()):
            a = np.asarray(v)
            out[str(b)][str(t)] = [len(a), float(a.mean()), float(np.median(a)), float(a.std())]
        return dict(out)


def host_ms_per_step(r: Round) -> float:
    """Host milliseconds per decode step of round ``r``: (wall − elapsed) / steps."""
    return 1000 * (r.decode_seconds - r.engine_decode_seconds) / max(len(r.decode_steps), 1)


@dataclass(frozen=True)
class NgramCounts:
    """Reviewed and accepted draft positions (1-based index ``i − 1``) and the row-steps."""

    reviewed: tuple[int, ...]
    accepted: tuple[int, ...]
    drafted_steps: int
    row_steps: int

    @property
    def alpha_by_position(self) -> tuple[float, ...]:
        """``α_i = accepted_i / reviewed_i`` while position ``i`` was reviewed at all."""
        out = []
        for r, a in zip(self.reviewed, self.accepted, strict=True):
            if r == 0:
                break
            out.append(a / r)
        return tuple(out)

    @property
    def match_rate(self) -> float:
        return self.drafted_steps / self.row_steps


def ngram_counts(rounds: Iterable[Round]) -> NgramCounts:
    """Exact per-position counts and the match rate of n-gram rounds (module docstring)."""
    reviewed: dict[int, int] = defaultdict(int)
    accepted: dict[int, int] = defaultdict(int)
    drafted_steps = row_steps = 0
    for r in rounds:
        row_steps += sum(s.generation_requests for s in r.decode_steps)
        for resp in r.responses:
            spec = resp["metrics"].get("speculative_decoding") or {}
            # absent or null where the request ran no verify step (a schedule's k = 0)
            drafted = spec.get("per_step_drafted") or []
            got = spec.get("per_step_accepted") or []
            if len(drafted) != len(got):
                raise ValueError("per_step_drafted and per_step_accepted differ in length")
            for d, a in zip(drafted, got, strict=True):
                if d <= 0:
                    continue
                drafted_steps += 1
                for i in range(1, d + 1):
                    if a >= i - 1:
                        reviewed[i] += 1
                    if a >= i:
                        accepted[i] += 1
    if row_steps == 0:
        raise ValueError("no decode steps in these rounds")
    top = max(reviewed, default=0)
    return NgramCounts(
        tuple(reviewed[i] for i in range(1, top + 1)),
        tuple(accepted[i] for i in range(1, top + 1)),
        drafted_steps,
        row_steps,
    )


def drafter_first_pass(
    dm: dict[int, dict[int, float]],
    target_at: Callable[[int, int], float],
    drafter_pass: dict[int, float],
    schedule_k: dict[int, Sequence[int]],
) -> dict[int, dict[int, float]]:
    """``c_d1(B, k + 2) = dm(B, B(k+1)) − c_0(B, B(k+1)) − max(k − 1, 0)·c_d1(B, 1)`` for
    every ``k`` of ``schedule_k[B]`` measured in ``dm`` (module docstring); ``target_at(B, T)``
    reads the target's cost table. A difference below 0 (the drafter's share lost in the
    noise of two measured steps) is priced 0; :func:`negative_differences` lists them."""
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for (b, m), value in _first_pass_differences(dm, target_at, drafter_pass, schedule_k).items():
        out[b][m] = max(value, 0.0)
    return dict(out)


def negative_differences(
    dm: dict[int, dict[int, float]],
    target_at: Callable[[int, int], float],
    drafter_pass: dict[int, float],
    schedule_k: dict[int, Sequence[int]],
) -> list[dict[str, float]]:
    """The first-pass differences of :func:`drafter_first_pass` that came out below 0, as
    measured (for the record: ``{"batch", "positions", "ms"}``)."""
    diffs = _first_pass_differences(dm, target_at, drafter_pass, schedule_k)
    return [{"batch": b, "positions": m, "ms": v} for (b, m), v in diffs.items() if v < 0]


def _first_pass_differences(dm, target_at, drafter_pass, schedule_k) -> dict:
    out = {}
    for b, ks in schedule_k.items():
        for k in ks:
            t = b * (k + 1)
            if t in dm.get(b, {}):
                out[(b, k + 2)] = dm[b][t] - target_at(b, t) - max(k - 1, 0) * drafter_pass[b]
    return out
