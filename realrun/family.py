"""Load one cascade's models — a *family*: target first, drafters largest first, Max-Gram last
when asked — on either backend, and set its CPU threads.

Backends (:data:`BACKENDS`): ``"transformers"`` (hub ids in the local cache, directories, or
``.gguf`` files dequantized; :mod:`realrun.loading`) or ``"llama.cpp"``
(:mod:`realrun.llamacpp_model`: ``.gguf`` files run as stored on the CPU — one dtype, the
file's own). :func:`set_threads` reaches both torch and llama.cpp.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.loading import load_model
from realrun.maxgram import MaxGram
from realrun.prefix_store import PrefixStore
from realrun.prompts import load_prompts
from realrun.vocabulary import check_logit_width, check_shared_vocabulary
from simulate.decoder.interface import Proposer, TokenModel

#: Inference engines a family can run on: transformers (hub ids, directories, GGUF files
#: dequantized) or llama.cpp (GGUF files as stored, :mod:`realrun.llamacpp_model`).
BACKENDS = ("transformers", "llama.cpp")


@dataclass
class Family:
    """Loaded models of one cascade (target first, Max-Gram last if asked) and their tokenizer."""

    chain: list[TokenModel | Proposer]
    tokenizer: PreTrainedTokenizerBase
    dtype: str
    device: str
    backend: str = "transformers"

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.chain]

    @property
    def parameters(self) -> int:
        """Parameters of its transformers models (0 on llama.cpp)."""
        models = [m.model for m in self.chain if isinstance(m, HFTokenModel)]
        return sum(p.numel() for model in models for p in model.parameters())

    @property
    def assistants(self) -> list[str]:
        """The models transformers' assisted generation can draft with (those loaded
        through transformers)."""
        return [m.name for m in self.chain if isinstance(m, HFTokenModel)]


def load_family(
    sources: Sequence[str],
    *,
    mag: bool = False,
    bigram: str | None = None,
    device: str = "auto",
    dtype: str = "auto",
    names: Sequence[str] | None = None,
    backend: str = "transformers",
) -> Family:
    """Load ``sources`` (target first; hub ids in the local cache, directories or ``.gguf``;
    ``backend="llama.cpp"``: ``.gguf`` files only, weights as stored, ``dtype="auto"``),
    check they share one vocabulary, and append Max-Gram when ``mag`` (bigram fallback from
    ``bigram``, an ``.npz`` table, else counted over the ``classic`` shipped prompts)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not sources:
        raise ValueError("give at least one model (the target)")
    if bigram is not None and not mag:
        raise ValueError("a bigram table needs Max-Gram (mag=True / --mag)")
    if names is not None and len(names) != len(sources):
        raise ValueError(f"names must name each of the {len(sources)} sources, got {names}")
    if backend == "llama.cpp":
        from realrun.llamacpp_model import load_gguf_models

        loaded, tokenizer = load_gguf_models(sources, names=names, device=device, dtype=dtype)
        chain: list[TokenModel | Proposer] = list(loaded)
        repack = "" if loaded[0].extra_buffers else ", no repack (AMX)"
        dtype_name, device_name = f"gguf:{loaded[0].file_type}{repack}", "cpu"
    else:
        loaded = [
            load_model(s, device=device, dtype=dtype, name=None if names is None else names[i])
            for i, s in enumerate(sources)
        ]
        check_shared_vocabulary({m.name: m.tokenizer for m in loaded})
        tokenizer = loaded[0].tokenizer
        chain = [HFTokenModel(m.model, m.name, prefix_store=PrefixStore()) for m in loaded]
        dtype_name = str(loaded[0].dtype).removeprefix("torch.")
        device_name = str(loaded[0].device)
    if len({m.name for m in loaded}) != len(loaded):
        raise ValueError(f"models must be distinct, got names {[m.name for m in loaded]}")
    check_logit_width(loaded)
    if mag:
        table = (
            BigramTable.load(bigram, tokenizer)
            if bigram
            else BigramTable.from_corpus(
                [p.text for p in load_prompts("classic")],
                tokenizer,
                vocab_size=loaded[0].vocab_size,
            )
        )
        chain.append(MaxGram(table))
    if len(chain) < 2:
        raise ValueError("give at least two models (target and a drafter), or one and --mag")
    return Family(chain, tokenizer, dtype_name, device_name, backend)


def set_threads(family: Family, threads: int) -> None:
    """Use ``threads`` CPU threads: torch's, and every llama.cpp model's of the family."""
    torch.set_num_threads(threads)
    for m in family.chain:
        if hasattr(m, "set_threads"):
            m.set_threads(threads)


def available_memory() -> int:
    """Bytes of memory available to a new allocation without swapping (``MemAvailable`` of
    ``/proc/meminfo``; where there is none, the free pages)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


#: Bytes per parameter :func:`room_for_another` wants free: a float32 copy and half again
#: (a load's dequantizing and casting, the caches and activations of its passes).
ROOM_PER_PARAMETER = 6


def room_for_another(families: Iterable[Family]) -> bool:
    """Whether the memory available holds another family as large as the largest of
    ``families`` in any dtype (:data:`ROOM_PER_PARAMETER` bytes per parameter)."""
    largest = max((f.parameters for f in families), default=0)
    return available_memory() >= ROOM_PER_PARAMETER * largest
