"""Speculative-decoding totals of one engine run, whatever format they were read from.

``A_0`` is the number of verify steps (``drafts``) and ``A_i`` (``i = 1..k``) the steps whose
first ``i`` draft tokens were all accepted (``per_position``, the engines' counter of 0-based
position ``i − 1``). Consistency (a ``ValueError`` naming the counter otherwise): every counter
finite, non-negative and integral; ``accepted ≤ draft_tokens ≤ k·A_0``; the per-position
counts present for every position ``0..k−1``, non-increasing, ``A_1 ≤ A_0`` and summing to
the accepted total; of two scrapes, no counter smaller in the later one.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace

#: Relative precision of llama.cpp's printed totals (C++ ``<<`` of a double: 6 digits).
PRINTED_PRECISION = 5e-6


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
            object.__setattr__(self, key, counter_value(f"{name}: {key}", getattr(self, key)))
        if self.k < 1 and self.draft_tokens > 0:
            raise ValueError(f"{name}: the draft length k must be >= 1, got {self.k}")
        if self.accepted > self.draft_tokens:
            raise ValueError(
                f"{name}: accepted tokens ({self.accepted}) exceed drafted tokens "
                f"({self.draft_tokens})"
            )
        if self.draft_tokens > self.k * self.drafts * (1 + PRINTED_PRECISION):
            raise ValueError(
                f"{name}: {self.draft_tokens} drafted tokens exceed k·drafts = "
                f"{self.k}·{self.drafts} (at most k tokens per draft)"
            )
        if self.per_position is None:
            return
        a = tuple(
            counter_value(f"{name}: accepted at position {i}", v)
            for i, v in enumerate(self.per_position)
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
        if abs(sum(a) - self.accepted) > PRINTED_PRECISION * self.accepted:
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


def summed(parts: Sequence[SpecCounters]) -> SpecCounters:
    """The counters of several files of one format and draft length, added up."""
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


def counter_value(name: str, value: object) -> int:
    """A counter: a finite, non-negative, integral number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a count (a non-negative integer), got {value!r}")
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise ValueError(f"{name} must be a count (a non-negative integer), got {value!r}")
    return int(value)
