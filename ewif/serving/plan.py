"""What an emission chooses, before it is rendered: one drafter's plan on an engine (its
method, draft length, EWIF, and per batch size its choices and schedule ranges), and the
constants both the pricing (:mod:`ewif.serving.emit`) and the rendering
(:mod:`ewif.serving.render`) name."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ewif.predict.batch import BatchChoice, ScheduleRange

#: The longest n-gram an engine's lookup matches (vLLM prompt_lookup_max, transformers
#: max_matching_ngram_size, llama.cpp's fixed lookup n-gram). Max-Gram has no upper bound;
#: longer windows change little once a match is this long.
LOOKUP_MAX = 4
#: The shortest n-gram an engine's lookup matches (Max-Gram's default minimum match, 1).
LOOKUP_MIN = 1

DRAFT_MODEL = "draft model"
NGRAM = "n-gram lookup"
NONE = "none"


@dataclass(frozen=True)
class Plan:
    """One drafter's best plain drafting on an engine: ``k`` at batch 1 (or the single ``k``)
    and its exact EWIF at batch 1; with batch sizes, the choices emitted by asked batch size,
    the ranges emitted as a per-batch-size schedule (None when one ``k`` is emitted) and the
    best schedule without the engine's limits (``best_ranges``)."""

    drafter: str
    method: str
    k: int
    ewif: float
    by_batch: tuple[BatchChoice, ...] | None = None
    ranges: tuple[ScheduleRange, ...] | None = None
    best_ranges: tuple[ScheduleRange, ...] | None = None

    @property
    def score(self) -> float:
        """EWIF without batch sizes, else the mean throughput ratio over the asked sizes."""
        if self.by_batch is None:
            return self.ewif
        return float(np.mean([c.ratio for c in self.by_batch]))
