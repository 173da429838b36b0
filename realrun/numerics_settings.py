"""The numerics search's settings: the candidates ``(dtype, threads)`` and how to measure and
judge them, checked (:func:`search_settings`, the arguments of
:func:`realrun.numerics.measure_numerics`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ewif.base import validate
from realrun.invariance import RULES
from realrun.loading import select_device
from realrun.numerics_choice import DEFAULT_CHOICE, check_choice
from realrun.numerics_rounds import MIN_ROUNDS
from simulate.decoder.sampling import Decoding

CPU_DTYPES = ("float32", "bfloat16", "float16")
#: The arguments of :func:`realrun.numerics.measure_numerics` that :func:`search_settings` takes.
SETTINGS_ARGUMENTS = (
    "device", "dtype", "threads", "backend", "max_new_tokens", "leniences", "decoding", "k_max",
    "max_m", "repeats", "warmup", "screen_repeats", "exhaustive", "min_agreement",
    "batch_invariance", "invariance_positions", "progress", "min_timing_seconds",
    "numerics_choice",
)  # fmt: skip


@dataclass(frozen=True)
class SearchSettings:
    """What the search was asked: the candidates' dtypes and thread counts, and how to
    measure and judge them (:func:`realrun.numerics.measure_numerics`)."""

    dtypes: tuple[str, ...]
    counts: tuple[int, ...]
    max_new_tokens: int
    leniences: tuple[float, ...]
    decoding: Decoding
    k_max: int
    max_m: int
    repeats: int = 10
    warmup: int = 1
    screen_repeats: int = MIN_ROUNDS
    exhaustive: bool = False
    min_agreement: float = 0.99
    rule: str = "strict"
    invariance_positions: int = 48
    progress: bool = True
    min_timing_seconds: float = 0.0
    choice: str = DEFAULT_CHOICE

    @property
    def searching(self) -> bool:
        return len(self.dtypes) * len(self.counts) > 1


def search_settings(
    *,
    device: str,
    dtype: str | Sequence[str],
    threads: int | str | Sequence[int],
    backend: str,
    batch_invariance: str,
    k_max: int,
    max_m: int | None,
    leniences: Sequence[float],
    **given,
) -> SearchSettings:
    """The candidates (``"auto"``: every CPU dtype on transformers, every thread count
    ``cores..1`` on a CPU; a list or tuple of CPU dtypes or of thread counts: those, e.g. a
    reduced set both searches of ``benchmarks/numerics_search.py`` cover) and the rest of
    the arguments of :func:`realrun.numerics.measure_numerics`, checked, as :class:`SearchSettings`
    (``max_m`` None: ``2·k_max``)."""
    if batch_invariance not in RULES:
        raise ValueError(
            f"batch_invariance must be one of {', '.join(RULES)}, got {batch_invariance!r}"
        )
    given.update(rule=batch_invariance, k_max=k_max, leniences=tuple(leniences))
    given["max_m"] = 2 * k_max if max_m is None else max_m
    validate.cost("min_timing_seconds", given["min_timing_seconds"])
    given["choice"] = check_choice(given.pop("numerics_choice"))
    screen = min(given.pop("screen_repeats"), given["repeats"])
    on_cpu = backend == "llama.cpp" or select_device(device).type == "cpu"
    if threads == "auto":
        cores = os.cpu_count() or 1
        counts = tuple(range(cores, 0, -1)) if on_cpu else (torch.get_num_threads(),)
    elif isinstance(threads, (list, tuple)):
        counts = tuple(validate.count("threads", t, minimum=1) for t in threads)
    else:
        counts = (validate.count("threads", threads, minimum=1),)
    if isinstance(dtype, (list, tuple)):
        bad = [d for d in dtype if d not in CPU_DTYPES]
        if bad or not dtype:
            raise ValueError(f"dtype candidates must be some of {CPU_DTYPES}, got {list(dtype)!r}")
        return SearchSettings(tuple(dtype), counts, screen_repeats=screen, **given)
    auto = dtype == "auto" and on_cpu and backend == "transformers"
    return SearchSettings(CPU_DTYPES if auto else (dtype,), counts, screen_repeats=screen, **given)
