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

Helpers: :func:`write_gguf` here; the tokenizer and model builders (:func:`build_llama`,
:func:`build_qwen2`, :data:`WORDS`, :data:`EOS`, ...) live in :mod:`realrun.tiny`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

from realrun.tiny import PROMPT_TEXTS, build_qwen2, build_tokenizer, write_family


def write_gguf(model: Qwen2ForCausalLM, path: Path) -> Path:
    """Write ``model`` (float32) as a qwen2 GGUF file with a byte-level BPE tokenizer
    (256 byte tokens, two merges, ``<|endoftext|>``); ``model.config.vocab_size`` must
    be 259."""
    import gguf
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    config = model.config
    spelled = bytes_to_unicode()
    tokens = [spelled[b] for b in range(256)] + ["he", "ll", "<|endoftext|>"]
    if config.vocab_size != len(tokens):
        raise ValueError(f"write_gguf needs vocab_size {len(tokens)}, got {config.vocab_size}")
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("tiny-qwen2")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(float(config.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 258 + [3])
    writer.add_token_merges(["h e", "l l"])
    writer.add_eos_token_id(258)
    writer.add_bos_token_id(258)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, config.num_hidden_layers)
    for key, tensor in model.state_dict().items():
        name = names.get_name(key, try_suffixes=(".weight", ".bias"))
        writer.add_tensor(name, tensor.detach().numpy().astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


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
