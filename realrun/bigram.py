"""Bigram table: the greedy next token for every token of a vocabulary.

Max-Gram's fallback is a deterministic bigram model, so only its argmax matters:
``next_token[a] = argmax_b P(b | a)``. Two ways to obtain it:

* :meth:`BigramTable.from_corpus` — maximum-likelihood counts ``#(a, b)`` over adjacent
  token pairs of each text (tokenized with the model's tokenizer, no special tokens);
  ties go to the smaller id; a token never seen as a predecessor maps to the most
  frequent token of the corpus (the unigram argmax).
* :meth:`BigramTable.from_model` — distilled from a causal LM:
  ``next_token[a] = argmax_b logits(b | [a])``, i.e. the model's own greedy continuation
  of the one-token context ``a``, for every ``a`` of the vocabulary in batched passes
  (each batch row is one context; only the argmax ids leave the device).

Files are ``.npz`` (format ``csd.bigram/1``): ``next_token`` (int64) plus the tokenizer's
:func:`realrun.vocabulary.vocabulary_fingerprint`, checked by :meth:`BigramTable.load`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tqdm.auto import tqdm

from ewif.base import validate
from realrun.vocabulary import vocabulary_fingerprint

if TYPE_CHECKING:
    from transformers import PreTrainedModel

FORMAT = "csd.bigram/1"


@dataclass(frozen=True)
class BigramTable:
    """``next_token[a]``: the proposed successor of token ``a``; ``vocab_hash``: the
    fingerprint of the tokenizer it was built with; ``origin``: how it was built."""

    next_token: np.ndarray
    vocab_hash: str
    origin: str

    def __post_init__(self) -> None:
        table = np.asarray(self.next_token)
        if table.ndim != 1 or table.size == 0 or table.dtype.kind not in "iu":
            raise ValueError(
                f"next_token must be a non-empty 1-d integer array, got shape {table.shape} "
                f"dtype {table.dtype}"
            )
        if table.min() < 0 or table.max() >= table.size:
            raise ValueError(
                f"next_token entries must be ids in [0, {table.size - 1}], got "
                f"{int(table.min() if table.min() < 0 else table.max())}"
            )
        table = table.astype(np.int64)
        table.setflags(write=False)
        object.__setattr__(self, "next_token", table)

    @property
    def vocab_size(self) -> int:
        return int(self.next_token.size)

    def __call__(self, token: int) -> int:
        """The successor of ``token``."""
        return int(self.next_token[token])

    @classmethod
    def from_corpus(
        cls,
        texts: Iterable[str],
        tokenizer: Any,
        *,
        vocab_size: int | None = None,
    ) -> BigramTable:
        """Count adjacent pairs in each text; ``vocab_size`` defaults to ``len(tokenizer)``
        (pass the model's logit width when it is larger)."""
        size = len(tokenizer) if vocab_size is None else validate.count("vocab_size", vocab_size, 1)
        pairs, unigrams = [], np.zeros(size, dtype=np.int64)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, got {type(text).__name__}")
            ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
            if ids.size and ids.max() >= size:
                raise ValueError(
                    f"vocab_size must exceed every token id, got {size} <= {ids.max()}"
                )
            np.add.at(unigrams, ids, 1)
            if ids.size > 1:
                pairs.append(ids[:-1] * size + ids[1:])
        if unigrams.sum() == 0:
            raise ValueError("texts must contain at least one token, got an empty corpus")
        table = np.full(size, int(np.argmax(unigrams)), dtype=np.int64)
        if pairs:
            codes, freq = np.unique(np.concatenate(pairs), return_counts=True)
            first, second = codes // size, codes % size
            # sort by predecessor, then by descending count, then by successor id: the
            # head of each predecessor's run is its argmax, the smaller id on ties
            order = np.lexsort((second, -freq, first))
            first, second = first[order], second[order]
            heads = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
            table[first[heads]] = second[heads]
        return cls(table, vocabulary_fingerprint(tokenizer), "corpus")

    @classmethod
    def from_model(
        cls,
        model: PreTrainedModel,
        tokenizer: Any,
        *,
        batch_size: int = 256,
    ) -> BigramTable:
        """Distil ``argmax_b logits(b | [a])`` for every ``a`` (batched single-token passes)."""
        import torch

        batch_size = validate.count("batch_size", batch_size, minimum=1)
        size = int(model.get_output_embeddings().weight.shape[0])
        device = model.get_output_embeddings().weight.device
        table = np.empty(size, dtype=np.int64)
        with torch.inference_mode():
            for start in tqdm(range(0, size, batch_size), desc="distilling bigram", leave=False):
                ids = torch.arange(start, min(start + batch_size, size), device=device)
                out = model(input_ids=ids[:, None], use_cache=False)
                table[start : start + ids.numel()] = out.logits[:, -1, :].argmax(-1).cpu().numpy()
        return cls(table, vocabulary_fingerprint(tokenizer), "model")

    def save(self, path: str | Path) -> Path:
        """Write the table to ``path`` (``.npz``)."""
        path = Path(path)
        if path.suffix != ".npz":
            raise ValueError(f"bigram file must end in .npz, got {str(path)!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            path,
            format=np.array(FORMAT),
            next_token=self.next_token,
            vocab_hash=np.array(self.vocab_hash),
            origin=np.array(self.origin),
        )
        return path

    @classmethod
    def load(cls, path: str | Path, tokenizer: Any | None = None) -> BigramTable:
        """Read a table; with ``tokenizer``, refuse one built for another vocabulary."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"bigram file {str(path)!r} does not exist")
        with np.load(path, allow_pickle=False) as data:
            if "format" not in data or str(data["format"]) != FORMAT:
                raise ValueError(f"{str(path)!r} is not a {FORMAT} file")
            table = cls(data["next_token"], str(data["vocab_hash"]), str(data["origin"]))
        if tokenizer is not None:
            expected = vocabulary_fingerprint(tokenizer)
            if table.vocab_hash != expected:
                raise ValueError(
                    f"bigram file {str(path)!r} was built for another vocabulary "
                    f"(hash {table.vocab_hash[:12]}, tokenizer has {expected[:12]})"
                )
        return table
