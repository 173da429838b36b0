"""Batched passes: ``B`` rows of ``m`` fresh positions in one forward, what a serving engine
pays per step, timed on both backends.

A serving engine with ``B`` running requests verifies all of them in one target pass over
``B`` rows (one sequence each, with its own cache), each row feeding ``m`` positions (the
last sampled token and ``m − 1`` drafts); a drafter's batched pass feeds one position per
row. The cost of such a pass, ``c(B, m)``, is not the batch-1 curve at ``B·m`` positions:
the matrix products see ``B·m`` rows either way, but attention runs over ``B`` caches, and
the kernels a backend picks depend on the batch shape.

* :class:`LlamaCppRows` — one ``llama_decode`` over ``B`` sequences of a llama.cpp context
  of its own (the model's weights, ``n_seq_max = B``), the call llama.cpp's server makes
  with ``-np B`` parallel slots;
* :class:`TransformersRows` — one forward of a ``(B, m)`` batch over a ``B``-row
  ``DynamicCache`` (rows cut to one common context length: transformers' rows share
  positions).

Both prefill every row once with a measuring context (outside the clock); every timed pass
rolls each row back to its context and feeds ``m`` fresh positions with logits for all of
them (a review pass; the logits stay in the backend, as in a server).

:func:`time_batched` times ``c(B, m)`` of every model for every ``B`` of ``rows`` and every
``m`` of :func:`realrun.timing.grid`, with the logit rows a run asks of such a pass
(:func:`rows_per_sequence` per sequence) and, for a llama.cpp drafter, once more with
one logit row in all (the pass llama.cpp's server makes when it re-evaluates the target's
batch on the drafter), all passes in one shuffled order per round (interleaved, as
:func:`realrun.timing.time_family`, so a drifting machine hits every point alike), the
**mean** of the rounds with its standard error; :func:`batch_costs` turns the seconds into
:class:`ewif.files.batch_costs.BatchCosts` in a model set's unit.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ewif.base import validate
from ewif.files.batch_costs import BatchCosts
from realrun.pass_timing import PassTiming, grid


class BatchedRows(Protocol):
    """``rows`` sequences of one model (``drafter``: not the target), prefilled once, timed
    pass by pass: ``outputs`` logit rows per sequence, or (``outputs=0``) one in all."""

    name: str
    rows: int
    drafter: bool
    one_output: bool  # whether a pass with one logit row in all can be timed

    def prefill(self, contexts: Sequence[Sequence[int]]) -> None: ...

    def timed_pass(self, m: int, rng: random.Random, outputs: int) -> float: ...


class LlamaCppRows:
    """``rows`` sequences of a :class:`~realrun.llamacpp_model.LlamaCppTokenModel`'s
    weights in a llama.cpp context of their own (module docstring)."""

    one_output = True

    def __init__(
        self, model, rows: int, context_tokens: int, max_m: int, drafter: bool = False
    ) -> None:
        self.rows = validate.count("rows", rows, minimum=1)
        self.name, self.drafter = model.name, drafter
        self._vocab_size = model.vocab_size
        lib = model._lib
        per_row = validate.count("context_tokens", context_tokens, minimum=1) + max_m + 1
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = self.rows * per_row
        cparams.n_batch = max(per_row, self.rows * max_m)
        cparams.n_ubatch = cparams.n_batch
        cparams.n_seq_max = self.rows
        cparams.n_outputs_max = self.rows * max_m
        cparams.n_threads = model.n_threads
        cparams.n_threads_batch = model.n_threads_batch
        cparams.no_perf = True
        ctx = lib.llama_init_from_model(model._model, cparams)
        if not ctx:
            raise ValueError(
                f"llama.cpp could not create a {self.rows}-row context for {self.name!r}"
            )
        self._lib, self._ctx = lib, ctx
        self._memory = lib.llama_get_memory(ctx)
        self._batch = lib.llama_batch_init(cparams.n_batch, 0, 1)
        self._lengths: list[int] = []

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """One ``llama_decode`` of ``(token, position, sequence, logits?)`` entries."""
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (token, pos, seq, out) in enumerate(entries):
            batch.token[i] = token
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = out
        code = self._lib.llama_decode(self._ctx, batch)
        if code != 0:
            raise RuntimeError(f"llama_decode failed for {self.name!r} (code {code})")

    def prefill(self, contexts: Sequence[Sequence[int]]) -> None:
        self._lib.llama_memory_clear(self._memory, True)
        self._lengths = []
        for seq, ctx in enumerate(_rows_of(contexts, self.rows)):
            last = len(ctx) - 1
            self._decode([(t, p, seq, p == last) for p, t in enumerate(ctx)])
            self._lengths.append(len(ctx))

    def timed_pass(self, m: int, rng: random.Random, outputs: int) -> float:
        entries = []
        for seq, length in enumerate(self._lengths):
            if not self._lib.llama_memory_seq_rm(self._memory, seq, length, -1):
                raise RuntimeError(f"llama.cpp could not roll back row {seq} of {self.name!r}")
            entries += [
                (rng.randrange(self._vocab_size), length + i, seq, i >= m - outputs)
                for i in range(m)
            ]
        if outputs == 0:  # one logit row in all: the last position of the batch
            entries[-1] = (*entries[-1][:3], True)
        start = time.perf_counter()
        self._decode(entries)
        return time.perf_counter() - start

    def close(self) -> None:
        if getattr(self, "_ctx", None):
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self._ctx)
            self._ctx = None

    def __del__(self) -> None:
        self.close()


class TransformersRows:
    """``rows`` sequences of a :class:`~realrun.hf_model.HFTokenModel`'s model in one
    ``DynamicCache`` (module docstring)."""

    one_output = False  # transformers keeps the same positions' logits in every row

    def __init__(self, model, rows: int, drafter: bool = False) -> None:
        self.rows = validate.count("rows", rows, minimum=1)
        self.name, self.drafter = model.name, drafter
        self._model = model.model
        self._vocab_size = model.vocab_size
        self._cache_kw = getattr(model, "_cache_kw", "past_key_values")
        self._keep_kw = getattr(model, "_keep_kw", "logits_to_keep")
        self._cache = None
        self._length = 0

    def _forward(self, ids: list[list[int]], keep: int):
        import torch
        from transformers import DynamicCache

        device = self._model.get_output_embeddings().weight.device
        if self._cache is None:
            self._cache = DynamicCache(config=self._model.config)
        with torch.inference_mode():
            kwargs = {self._cache_kw: self._cache, "use_cache": True}
            if self._keep_kw is not None:
                kwargs[self._keep_kw] = keep
            input_ids = torch.tensor(ids, dtype=torch.long, device=device)
            out = self._model(input_ids=input_ids, **kwargs)
            out.logits.sum().item()  # the scores exist (synchronises a GPU)

    def prefill(self, contexts: Sequence[Sequence[int]]) -> None:
        rows = _rows_of(contexts, self.rows)
        self._length = min(len(c) for c in rows)
        self._cache = None
        self._forward([c[: self._length] for c in rows], 1)

    def timed_pass(self, m: int, rng: random.Random, outputs: int) -> float:
        extra = self._cache.get_seq_length() - self._length
        if extra:
            self._cache.crop(-extra)
        ids = [[rng.randrange(self._vocab_size) for _ in range(m)] for _ in range(self.rows)]
        start = time.perf_counter()
        self._forward(ids, max(outputs, 1))
        return time.perf_counter() - start


def _rows_of(contexts: Sequence[Sequence[int]], rows: int) -> list[list[int]]:
    """One context per row, cycling through ``contexts``."""
    ctxs = [[int(t) for t in c] for c in contexts]
    if not ctxs or not all(ctxs):
        raise ValueError("contexts must hold at least one non-empty token list")
    return [ctxs[r % len(ctxs)] for r in range(rows)]


def rows_per_sequence(model: int, m: int) -> int:
    """Logit rows a sequence of a batched SD pass of model ``model`` (0: the target) over
    ``m`` positions returns: the target reviews, ``m``; the drafter generates (one or two
    positions after a catch-up) or re-feeds, one row."""
    return 1 if model > 0 and m <= 2 else m


@dataclass(frozen=True)
class BatchedTiming:
    """What :func:`time_batched` measured: ``passes[model][B]`` with the logit rows a run
    asks (:func:`rows_per_sequence` per sequence), and ``reevaluate[model][B]``, a
    drafter's pass with one logit row in all (llama.cpp only)."""

    passes: dict[str, dict[int, PassTiming]]
    reevaluate: dict[str, dict[int, PassTiming]]

    def to_dict(self) -> dict:
        return {
            kind: {n: {str(b): t.to_dict() for b, t in per.items()} for n, per in table.items()}
            for kind, table in (("passes", self.passes), ("reevaluate", self.reevaluate))
        }


def time_batched(
    rows_of: Sequence[BatchedRows],
    contexts: Sequence[Sequence[int]],
    max_m: int,
    *,
    rounds: int = 5,
    warmup: int = 1,
    seed: int = 0,
    progress: Callable[[], object] | None = None,
) -> BatchedTiming:
    """Every batched-rows object (one per model and ``B``), prefilled once with
    ``contexts``, timed over :func:`~realrun.timing.grid` ``(max_m)`` in ``rounds``
    interleaved rounds after ``warmup`` untimed ones (module docstring); a drafter that can
    is timed with one logit row in all too."""
    rounds = validate.count("rounds", rounds, minimum=1)
    warmup = validate.count("warmup", warmup)
    ms = grid(max_m)
    rng = random.Random(seed)
    for r in rows_of:
        r.prefill(contexts)
    keys = [(i, m, False) for i in range(len(rows_of)) for m in ms]
    keys += [(i, m, True) for i, r in enumerate(rows_of) if r.drafter and r.one_output for m in ms]
    seconds: dict[tuple[int, int, bool], list[float]] = {key: [] for key in keys}
    for n in range(warmup + rounds):
        rng.shuffle(keys)
        times = {
            (i, m, one): rows_of[i].timed_pass(
                m, rng, 0 if one else rows_per_sequence(int(rows_of[i].drafter), m)
            )
            for i, m, one in keys
        }
        if n >= warmup:
            for key, value in times.items():
                seconds[key].append(value)
            if progress is not None:
                progress()
    tables: tuple[dict, dict] = ({}, {})
    for i, m, one in sorted(seconds):
        if m == ms[0]:
            r = rows_of[i]
            tables[one].setdefault(r.name, {})[r.rows] = PassTiming.of(
                ms, [seconds[(i, x, one)] for x in ms]
            )
    return BatchedTiming(*tables)


def rows_for(
    model, rows: int, context_tokens: int, max_m: int, drafter: bool = False
) -> BatchedRows:
    """The batched rows of ``model`` for its backend (llama.cpp or transformers)."""
    from realrun.llamacpp_model import LlamaCppTokenModel

    if isinstance(model, LlamaCppTokenModel):
        return LlamaCppRows(model, rows, context_tokens, max_m, drafter)
    return TransformersRows(model, rows, drafter)


def measure_batch_costs(
    models: Sequence,
    contexts: Sequence[Sequence[int]],
    sizes: Sequence[int],
    *,
    max_m: int,
    unit_seconds: float,
    rounds: int = 5,
    progress: Callable[[], object] | None = None,
) -> tuple[BatchCosts, BatchedTiming]:
    """:class:`~ewif.files.batch_costs.BatchCosts` of a family (``models``: target first; proposers
    get flat zero curves) for every ``B`` of ``sizes`` over ``contexts``, in units of
    ``unit_seconds`` (the model set's AR token), with the timings behind them."""
    from simulate.decoder.interface import TokenModel

    sizes = sorted({validate.count("batch size", b, minimum=1) for b in sizes})
    if not sizes:
        raise ValueError("sizes must hold at least one batch size")
    longest = max(len(c) for c in contexts)
    neural = [(i, m) for i, m in enumerate(models) if isinstance(m, TokenModel)]
    rows = [rows_for(m, b, longest, max_m, drafter=i > 0) for i, m in neural for b in sizes]
    try:
        timed = time_batched(rows, contexts, max_m, rounds=rounds, progress=progress)
    finally:
        for r in rows:
            getattr(r, "close", lambda: None)()
    return batch_costs(timed, [m.name for m in models], unit_seconds), timed


def batch_costs(timed: BatchedTiming, names: Sequence[str], unit_seconds: float) -> BatchCosts:
    """The :class:`~ewif.files.batch_costs.BatchCosts` of ``timed`` for the models ``names`` (target
    first; a model without batched timings — a proposer — gets a flat zero curve, since
    ewif prices proposers row by row) in units of ``unit_seconds``; the re-evaluation curves
    where a drafter has them (elsewhere the ordinary curve)."""
    if not unit_seconds > 0:
        raise ValueError(f"unit_seconds must be > 0, got {unit_seconds!r}")

    def table(source: dict[str, dict[int, PassTiming]]) -> dict[int, tuple[np.ndarray, ...]]:
        sizes = sorted({b for per in timed.passes.values() for b in per})
        return {
            b: tuple(
                source[n][b].dense() / unit_seconds
                if n in source
                else timed.passes[n][b].dense() / unit_seconds
                if n in timed.passes
                else np.zeros(1)
                for n in names
            )
            for b in sizes
        }

    return BatchCosts(table(timed.passes), table(timed.reevaluate) if timed.reevaluate else None)
