"""Tiny in-process models and tokenizer for realrun tests (no hub, no downloads).

Fixtures (session-scoped, reusable by every realrun test):

* ``tiny_tokenizer_dir`` -> Path: a WordLevel tokenizer over :data:`WORDS` (specials
  ``<unk>`` 0, ``<bos>`` 1, ``<eos>`` 2, ``<pad>`` 3; whitespace/punctuation
  pre-tokenizer) wrapped in ``PreTrainedTokenizerFast`` and saved with
  ``save_pretrained``; ``tiny_tokenizer`` -> the loaded tokenizer (``len == VOCAB``).
* ``tiny_model_dirs`` -> dict name -> Path of saved models sharing that tokenizer and
  vocabulary ``VOCAB``: ``"target"`` (Llama, hidden 64, 2 layers), ``"draft"`` (Llama,
  hidden 48, 2 layers), ``"tiny"`` (Qwen2, hidden 32, 1 layer) — independent random
  initialisations — and ``"near"`` (the target's weights plus small noise, a drafter with
  high acceptance). Every directory also holds the tokenizer, so ``load_model(path)``
  works on it.
* ``tiny_models`` -> dict name -> :class:`realrun.loading.LoadedModel` (CPU, float32)
  loaded through ``load_model`` from those directories.
* ``tiny_prompts`` -> list of token-id lists (prompts in the WordLevel vocabulary).
* ``tiny_gguf`` -> (Path of a qwen2 GGUF file written with the ``gguf`` package, the
  in-process ``Qwen2ForCausalLM`` it encodes); its tokenizer is byte-level BPE (gpt2).

Helpers: the tokenizer, model and GGUF builders (:func:`build_llama`, :func:`build_qwen2`,
:func:`write_gguf`, :data:`WORDS`, :data:`EOS`, ...) live in :mod:`realrun.tiny`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from realrun.tiny import (
    PROMPT_TEXTS,
    build_qwen2,
    build_tokenizer,
    write_family,
    write_gguf,
)


@pytest.fixture(scope="session", autouse=True)
def single_torch_thread():
    """Tiny models run fastest on one thread; on a shared CI machine more threads only
    oversubscribe the cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tokenizer")
    build_tokenizer().save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_tokenizer_dir):
    return PreTrainedTokenizerFast.from_pretrained(tiny_tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory) -> dict[str, Path]:
    return write_family(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="session")
def tiny_models(tiny_model_dirs):
    from realrun.loading import load_model

    return {
        name: load_model(path, name=name, device="cpu", dtype="float32")
        for name, path in tiny_model_dirs.items()
    }


@pytest.fixture(scope="session")
def tiny_prompts(tiny_tokenizer) -> list[list[int]]:
    return [tiny_tokenizer(text)["input_ids"] for text in PROMPT_TEXTS]


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory):
    model = build_qwen2(32, 2, seed=5, vocab_size=259)
    path = write_gguf(model, tmp_path_factory.mktemp("gguf") / "tiny-qwen2.gguf")
    return path, model


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory) -> Path:
    """The tiny prompt texts as a JSONL prompt set."""
    path = tmp_path_factory.mktemp("prompts") / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPT_TEXTS))
    return path
