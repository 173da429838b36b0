"""What one method of a side-by-side run measured: one prompt's run, and the sum over prompts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from simulate.decoder.cascade import CascadeStats


@dataclass(frozen=True)
class PromptRun:
    """What one method did on one prompt: its output ``tokens`` and decoding ``seconds``;
    ``weighted_cost``, the standardized cost of its counted passes (each priced at its size
    m), and ``counted``, those passes by size m per model; our decoder's ``stats`` and every
    neural model's ``pass_seconds`` by size m (None and empty for transformers' ``generate``,
    which counts nothing)."""

    tokens: list[int]
    seconds: float
    weighted_cost: float = 0.0
    counted: dict[str, Counter[int]] = field(default_factory=dict)
    counted_rows: dict[str, Counter[int]] = field(default_factory=dict)
    stats: CascadeStats | None = None
    pass_seconds: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    counted_one_row: dict[str, Counter[int]] = field(default_factory=dict)
    counted_context: dict[str, Counter[int]] = field(default_factory=dict)


@dataclass
class MethodTally:
    """Accumulated measurements of one method of a run (what
    :func:`realrun.side_by_side.divergences` reads)."""

    tokens: int = 0
    seconds: float = 0.0
    weighted_cost: float = 0.0
    counted: dict[str, Counter[int]] = field(default_factory=dict)  # model -> passes by m
    counted_rows: dict[str, Counter[int]] = field(default_factory=dict)  # -> their logit rows
    counted_one_row: dict[str, Counter[int]] = field(default_factory=dict)  # -> with one row
    counted_context: dict[str, Counter[int]] = field(default_factory=dict)  # -> Σ their L
    pass_seconds: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    stats: CascadeStats | None = None
    outputs: list[list[int]] = field(default_factory=list)

    def add(self, run: PromptRun) -> None:
        """Add one prompt's run."""
        self.tokens += len(run.tokens)
        self.seconds += run.seconds
        self.weighted_cost += run.weighted_cost
        for model, sizes in run.counted.items():
            self.counted.setdefault(model, Counter()).update(sizes)
        for model, rows in run.counted_rows.items():
            self.counted_rows.setdefault(model, Counter()).update(rows)
        for model, ones in run.counted_one_row.items():
            self.counted_one_row.setdefault(model, Counter()).update(ones)
        for model, context in run.counted_context.items():
            self.counted_context.setdefault(model, Counter()).update(context)
        for model, by_m in run.pass_seconds.items():
            for size, values in by_m.items():
                self.pass_seconds.setdefault(model, {}).setdefault(size, []).extend(values)
        self.outputs.append(run.tokens)
        if run.stats is not None:
            self.stats = run.stats if self.stats is None else self.stats + run.stats
