"""A llama.cpp model (a GGUF file) as a :class:`simulate.decoder.interface.TokenModel`.

Built on llama-cpp-python's C API (``llama_cpp.llama_cpp``, version 0.3.36: ``llama_batch``,
``llama_decode``, ``llama_get_logits`` and the memory API ``llama_memory_seq_rm``), so one
call is exactly one ``llama_decode`` over the fed positions. ``logits(tokens, n)`` follows
the interface's cache contract with llama.cpp's KV cache (one sequence, id 0) holding the
keys/values of ``cached`` (the tokens last fed):

1. ``p`` = length of the longest common prefix of ``tokens`` and ``cached``, capped at
   ``len(tokens) - n`` (the last ``n`` positions are always re-fed: their logits are
   returned);
2. rollback: remove positions ``p..`` of the sequence from the cache
   (``llama_memory_seq_rm(mem, 0, p, -1)``; when the memory cannot remove a tail, e.g. a
   recurrent model, the cache is cleared and everything is re-fed);
3. one ``llama_decode`` of a batch holding ``tokens[p:]`` at positions ``p..``, logits
   requested for the last ``n`` only; those ``n x V`` float32 scores are copied out.

Token trees (:meth:`~realrun.cached_model.CachedTokenModel.tree_logits`, the plan of
:mod:`realrun.tree_pass`): one ``llama_decode`` of a batch whose tokens carry **one sequence
id per root-to-leaf path** — a node belongs to the sequences of the leaves below it, the
tail to all — at positions by depth, so llama.cpp's own mask (a cell is seen by a token
when it shares the token's first sequence and sits at a position not after it) is tree
attention. A new path takes its parent's sequence when that one ends at the parent, else a
fresh id whose cached part is copied first (``llama_memory_seq_cp``: the prefix, and the
cached nodes above it when a drafter grows its tree level by level); the KV cache is
unified (``kv_unified``), so a copy only adds a sequence id to cells. The next call keeps
the accepted path (``_keep_path``): the sequence of a leaf below the path's end is cut
after it (``llama_memory_seq_rm``), every other cell dropped (``llama_memory_seq_keep``)
and the sequence renamed 0. ``tree_sequences`` bounds the leaves of one tree.

The weights are the GGUF's own (any quantization llama.cpp reads); the KV cache has
llama.cpp's default type (float16), as ``llama-cli`` runs it. On a CPU with AMX, a
llama.cpp built for it (``GGML_NATIVE``) repacks quantized weights into its AMX buffer type,
whose matrix product crashes the process (SIGSEGV) on the Q4_1 and Q4_K_M files of the
benchmark (the crash of ggml-org/llama.cpp#20824); so where llama.cpp reports
``AMX_INT8 = 1`` (:func:`amx_active`) the weights load without llama.cpp's extra buffer
types (``use_extra_bufts = false``, what ``llama-server --no-repack`` does), in plain CPU
buffers. Counters: ``passes``, ``tokens_fed``, ``pass_sizes`` (passes by positions ``m``)
and an optional ``timing_hook(fed, seconds)`` with the wall time of every decode (+ copy of
the scores), as :class:`realrun.hf_model.HFTokenModel`.

Prompts are encoded by the transformers tokenizer of the same GGUF (:func:`gguf_tokenizer`,
built from the file's metadata — vocabulary, merges, special tokens and chat template —
without loading any weights), so both backends see the same token ids for the same prompt.
:func:`load_gguf_models` loads a family.

``llama_cpp`` is imported lazily (the optional extra ``llamacpp``), so this module imports
without it.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ewif.base import validate
from realrun.cached_model import CachedTokenModel
from realrun.counters import TimingHook
from realrun.tree_pass import PendingTree, TreePass, depths, path_to
from realrun.vocabulary import check_gguf_vocabularies
from simulate.decoder.interface import common_prefix

_ERROR_LEVEL = 4  # ggml_log_level GGML_LOG_LEVEL_ERROR (ggml.h)
_state: dict = {}


def _lib():
    """The ``llama_cpp`` C API module, with the backend initialised and logging reduced to
    errors (llama.cpp prints every load step otherwise)."""
    if "lib" not in _state:
        try:
            import llama_cpp
        except ImportError as exc:
            raise ImportError(
                "the llama.cpp backend needs llama-cpp-python: pip install -e '.[llamacpp]' "
                "(it compiles llama.cpp; see docs/realrun.md, 'llama.cpp backend')"
            ) from exc

        @llama_cpp.llama_log_callback
        def quiet(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            if level == _ERROR_LEVEL:
                os.write(2, text)

        llama_cpp.llama_log_set(quiet, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        _state["log"] = quiet  # keep the callback alive
        _state["lib"] = llama_cpp
    return _state["lib"]


def amx_active() -> bool:
    """True when the loaded llama.cpp was built with its AMX backend and this CPU runs it
    (``AMX_INT8 = 1`` in ``llama_print_system_info``): its weight repacking is then turned
    off (module docstring)."""
    info = _lib().llama_print_system_info()
    return b"AMX_INT8 = 1" in (info or b"")


def program_flags() -> list[str]:
    """Flags that make llama.cpp's own programs (``llama-server``, ``llama-completion``, …)
    load weights as this backend does: ``--no-repack`` where :func:`amx_active`."""
    return ["--no-repack"] if amx_active() else []


class LlamaCppTokenModel(CachedTokenModel):
    """``TokenModel`` over a llama.cpp model loaded from a GGUF file (batch size 1).

    ``n_ctx``: positions the KV cache holds (longest ``tokens``); ``max_outputs``: the most
    logit rows one call may return (``n``; llama.cpp reserves ``max_outputs x V`` floats);
    ``n_threads``/``n_threads_batch``: llama.cpp's threads for one-token and batched
    decodes (default: all cores); ``tree_sequences``: the most leaves of a verified tree
    (sequence ids of the unified KV cache).
    """

    def __init__(
        self,
        path: str | Path,
        name: str | None = None,
        *,
        n_ctx: int = 4096,
        max_outputs: int = 512,
        n_threads: int | None = None,
        n_threads_batch: int | None = None,
        timing_hook: TimingHook | None = None,
        tree_sequences: int = 64,
    ) -> None:
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {str(path)!r} does not exist")
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self.n_ctx = validate.count("n_ctx", n_ctx, minimum=1)
        self.max_outputs = validate.count("max_outputs", max_outputs, minimum=1)
        self.tree_sequences = validate.count("tree_sequences", tree_sequences, minimum=1)
        threads = (
            (os.cpu_count() or 1)
            if n_threads is None
            else validate.count("n_threads", n_threads, minimum=1)
        )
        batch_threads = (
            threads
            if n_threads_batch is None
            else validate.count("n_threads_batch", n_threads_batch, minimum=1)
        )
        lib = _lib()
        self._lib = lib
        self.path = path
        self.name = name or path.name
        mparams = lib.llama_model_default_params()
        mparams.n_gpu_layers = 0
        mparams.use_extra_bufts = not amx_active()
        self.extra_buffers = bool(mparams.use_extra_bufts)
        model = lib.llama_model_load_from_file(str(path).encode(), mparams)
        if not model:
            raise ValueError(
                f"llama.cpp could not load {str(path)!r} (not a GGUF model file it supports)"
            )
        self._model = model
        self._vocab = lib.llama_model_get_vocab(model)
        self.vocab_size = int(lib.llama_vocab_n_tokens(self._vocab))
        buf = ctypes.create_string_buffer(256)
        lib.llama_model_desc(model, buf, len(buf))
        self.description = buf.value.decode(errors="replace")
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = self.n_ctx
        cparams.n_batch = self.n_ctx  # any pass fits one llama_decode
        # llama.cpp reserves a batch of one output token per sequence: no more sequences than
        # the context's positions and outputs (it aborts otherwise)
        self.tree_sequences = min(self.tree_sequences, self.n_ctx, self.max_outputs)
        cparams.n_seq_max = self.tree_sequences
        cparams.kv_unified = True  # a sequence copy only tags cells (module docstring)
        cparams.n_outputs_max = min(self.max_outputs, self.n_ctx)
        cparams.n_threads = threads
        cparams.n_threads_batch = batch_threads
        cparams.no_perf = True
        ctx = lib.llama_init_from_model(model, cparams)
        if not ctx:
            lib.llama_model_free(model)
            self._model = None
            raise ValueError(
                f"llama.cpp could not create a context for {str(path)!r} (n_ctx={self.n_ctx})"
            )
        self._ctx = ctx
        self._memory = lib.llama_get_memory(ctx)
        self._batch = lib.llama_batch_init(self.n_ctx, 0, self.tree_sequences)
        self._node_seqs: list[list[int]] = []  # the sequences through each cached tree node
        self.n_threads, self.n_threads_batch = threads, batch_threads
        CachedTokenModel.__init__(self, timing_hook)

    @property
    def file_type(self) -> str:
        """The weights' storage type as llama.cpp describes the model (``"<arch> <size>
        <type>"``; e.g. ``Q4_K - Medium``, ``F32`` for ``(guessed) all F32``)."""
        return self.description.split(" ", 2)[-1].removeprefix("(guessed) ").removeprefix("all ")

    def vocabulary(self) -> tuple[tuple[bytes, ...], int, int]:
        """``(token texts by id, BOS id, EOS id)`` as llama.cpp reads them from the GGUF."""
        lib, vocab = self._lib, self._vocab
        texts = tuple(lib.llama_vocab_get_text(vocab, i) for i in range(self.vocab_size))
        return texts, int(lib.llama_vocab_bos(vocab)), int(lib.llama_vocab_eos(vocab))

    def set_threads(self, n_threads: int, n_threads_batch: int | None = None) -> None:
        """Use ``n_threads`` for one-token decodes and ``n_threads_batch`` (default the same)
        for batched ones, from the next call on."""
        threads = validate.count("n_threads", n_threads, minimum=1)
        batch = (
            threads
            if n_threads_batch is None
            else validate.count("n_threads_batch", n_threads_batch, minimum=1)
        )
        self._lib.llama_set_n_threads(self._ctx, threads, batch)
        self.n_threads, self.n_threads_batch = threads, batch

    def _check_request(self, ids: list[int], n: int) -> None:
        if n > self.max_outputs:
            raise ValueError(
                f"n must be at most max_outputs={self.max_outputs} for model {self.name!r}, got {n}"
            )
        if len(ids) > self.n_ctx:
            raise ValueError(
                f"tokens must hold at most n_ctx={self.n_ctx} ids for model "
                f"{self.name!r}, got {len(ids)}"
            )

    def _forward(self, fed: list[int], start: int, n: int) -> np.ndarray:
        self._decode(fed, start, n)
        rows = np.ctypeslib.as_array(
            self._lib.llama_get_logits(self._ctx), shape=(n, self.vocab_size)
        )
        return np.array(rows, dtype=np.float32)

    def _drop_cache(self) -> None:
        self._lib.llama_memory_clear(self._memory, True)

    def close(self) -> None:
        """Free the batch, the context and the model (the object is unusable after)."""
        if getattr(self, "_ctx", None):
            self._lib.llama_batch_free(self._batch)
            self._lib.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            self._lib.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:
        self.close()

    def _rollback(self, ids: list[int], limit: int) -> int:
        """Keep the cache of the longest common prefix (at most ``limit``); return its length."""
        keep = common_prefix(self._cached, ids, limit)
        if keep < len(self._cached) and (
            keep == 0 or not self._lib.llama_memory_seq_rm(self._memory, 0, keep, -1)
        ):
            self.reset()
            return 0
        return keep

    def _forward_tree(self, plan: TreePass) -> np.ndarray:
        copies, seqs, self._node_seqs = path_sequences(plan, self._node_seqs, self.tree_sequences)
        for src, dst, end in copies:
            self._lib.llama_memory_seq_cp(self._memory, src, dst, 0, end)
        self._decode(plan.fed, plan.positions(), plan.rows, seqs)
        rows = np.ctypeslib.as_array(
            self._lib.llama_get_logits(self._ctx), shape=(plan.rows, self.vocab_size)
        )
        return np.array(rows, dtype=np.float32)

    def _keep_path(self, tree: PendingTree, path: list[int]) -> bool:
        """The sequence of a leaf below the path's end, cut after it; every other cell
        dropped; that sequence renamed 0 (module docstring)."""
        lib, mem = self._lib, self._memory
        s = self._node_seqs[path[-1]][0] if path else 0
        end = tree.position(path[-1]) + 1 if path else len(tree.base)
        self._node_seqs = []
        if not lib.llama_memory_seq_rm(mem, s, end, -1):
            return False
        lib.llama_memory_seq_keep(mem, s)
        if s != 0:
            lib.llama_memory_seq_cp(mem, s, 0, -1, -1)
            lib.llama_memory_seq_rm(mem, s, -1, -1)
        return True

    def _decode(
        self,
        fed: list[int],
        start: int | list[int],
        n: int,
        seqs: list[list[int]] | None = None,
    ) -> None:
        """One ``llama_decode`` of ``fed`` at positions ``start..`` (or the positions
        ``start``, one per token), in sequence 0 (or the sequences ``seqs[i]`` of each
        token); logits for the last n."""
        batch = self._batch
        m = len(fed)
        batch.n_tokens = m
        first_out = m - n
        positions = range(start, start + m) if isinstance(start, int) else start
        for i, (t, pos) in enumerate(zip(fed, positions, strict=True)):
            batch.token[i] = t
            batch.pos[i] = pos
            ids = (0,) if seqs is None else seqs[i]
            batch.n_seq_id[i] = len(ids)
            for k, s in enumerate(ids):
                batch.seq_id[i][k] = s
            batch.logits[i] = i >= first_out
        code = self._lib.llama_decode(self._ctx, batch)
        if code != 0:
            self.reset()
            raise RuntimeError(
                f"llama_decode of {m} positions failed for model {self.name!r} (code {code})"
            )


def path_sequences(
    plan: TreePass, cached: list[list[int]], limit: int
) -> tuple[list[tuple[int, int, int]], list[list[int]], list[list[int]]]:
    """Sequence ids for a tree pass (module docstring): ``(copies, fed, nodes)`` —
    ``copies[k] = (src, dst, end)``: copy sequence ``src``'s cells at positions ``< end`` to
    ``dst`` before the decode; ``fed[i]``: the sequences of the ``i``-th fed token (its own
    path's first); ``nodes[v]``: the sequences through every node afterwards. ``cached``: the
    sequences through the ``plan.old`` cached nodes; at most ``limit`` sequences."""
    nodes = [list(x) for x in cached[: plan.old]] + [[] for _ in plan.tokens[plan.old :]]
    tail: list[int] = [0]
    used = {0, *(s for x in nodes for s in x)}
    has_child = {p for p in plan.parents[: plan.old]}
    free = {v: nodes[v][0] for v in range(plan.old) if v not in has_child}
    if plan.old == 0:
        free[-1] = 0  # sequence 0 ends at the root: the prefix (and the tail)
    position = [plan.base + d - 1 for d in depths(plan.parents)]
    copies = []
    for c in range(plan.old, len(plan.tokens)):
        v = plan.parents[c]
        s = free.pop(v, None)
        if s is None:
            s = next((x for x in range(limit) if x not in used), None)
            if s is None:
                raise ValueError(
                    f"the tree has more leaves than tree_sequences={limit} sequence ids"
                )
            used.add(s)
            above = path_to(plan.parents, v)[::-1] if v >= 0 else []
            cached_above = next((a for a in above if a < plan.old), None)
            for a in above:
                nodes[a].append(s)
            if cached_above is not None:
                copies.append((nodes[cached_above][0], s, position[cached_above] + 1))
            else:
                tail.append(s)
                if plan.start:
                    copies.append((0, s, plan.start))
        nodes[c].insert(0, s)
        free[c] = s
    fed = [tail] * len(plan.tail) + nodes[plan.old :]
    return copies, fed, nodes


def gguf_tokenizer(path: str | Path):
    """The transformers tokenizer transformers builds from a GGUF file's metadata (tokens,
    merges, special tokens, chat template); no weights are read."""
    from transformers import AutoTokenizer

    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file {str(path)!r} does not exist")
    return AutoTokenizer.from_pretrained(
        str(path.parent), gguf_file=path.name, local_files_only=True
    )


def load_gguf_models(
    sources: Sequence[str],
    *,
    names: Sequence[str] | None = None,
    device: str = "auto",
    dtype: str = "auto",
    n_threads: int | None = None,
) -> tuple[list[LlamaCppTokenModel], object]:
    """``(models, tokenizer)`` of ``.gguf`` files for the llama.cpp backend: the weights as
    stored (``dtype`` must be ``"auto"``), on the CPU (``device`` ``"auto"`` or ``"cpu"``).
    Every model must have the target's vocabulary (token texts, BOS, EOS, as llama.cpp reads
    them); the tokenizer is the target's (:func:`gguf_tokenizer`), checked to agree with
    llama.cpp on the vocabulary size and EOS."""
    if dtype != "auto":
        raise ValueError(
            f"the llama.cpp backend runs a GGUF's weights as stored: dtype must "
            f"be 'auto', got {dtype!r}"
        )
    if device not in ("auto", "cpu"):
        raise ValueError(
            f"the llama.cpp backend runs on the CPU: device must be 'auto' or 'cpu', got {device!r}"
        )
    for s in sources:
        if Path(s).suffix.lower() != ".gguf":
            raise ValueError(f"the llama.cpp backend loads .gguf files, got {s!r}")
    models = [
        LlamaCppTokenModel(s, None if names is None else names[i], n_threads=n_threads)
        for i, s in enumerate(sources)
    ]
    vocabularies = {m.name: m.vocabulary() for m in models}
    check_gguf_vocabularies(vocabularies)
    eos = vocabularies[models[0].name][2]
    tokenizer = gguf_tokenizer(sources[0])
    if len(tokenizer) > models[0].vocab_size:
        raise ValueError(
            f"the tokenizer of {sources[0]!r} has {len(tokenizer)} tokens, more "
            f"than llama.cpp's {models[0].vocab_size}"
        )
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id != eos:
        raise ValueError(
            f"the tokenizer's EOS id {tokenizer.eos_token_id} differs from "
            f"llama.cpp's {eos} for {sources[0]!r}"
        )
    return models, tokenizer
