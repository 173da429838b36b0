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

Helpers: :func:`build_llama`, :func:`build_qwen2`, :func:`write_gguf` (importable as
``tests.realrun.conftest``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

SPECIALS = ["<unk>", "<bos>", "<eos>", "<pad>"]
WORDS = SPECIALS + (
    "the a an of to in is are was be and or not if then so that this it he she they we you "
    "i one two three four five six seven eight nine ten zero plus minus times equals half "
    "apples pens books cats dogs boxes coins miles hours days cost costs buys sells has have "
    "had does tom gives takes more less many much each every total left how what which why answer "
    "question step first second third next finally therefore because number numbers sum "
    "product def return print for while list int x y z n = + - * / ( ) : , . ? ! 0 1 2 3 4 5 "
    "6 7 8 9 red blue green big small old new fast slow run walk eat read write code python"
).split()
VOCAB = len(WORDS)
EOS = WORDS.index("<eos>")

PROMPT_TEXTS = [
    "tom has five apples and buys three more apples . how many apples does tom have ? tom has",
    "def sum ( x , y ) : return x + y",
    "which number is more : seven or nine ? the answer is",
    "a big red dog and a small blue cat run fast . the big red dog",
]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """WordLevel tokenizer over :data:`WORDS`."""
    vocab = {w: i for i, w in enumerate(WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
    )


def _common(hidden: int, layers: int, heads: int) -> dict:
    return dict(
        vocab_size=VOCAB,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=512,
        initializer_range=0.3,
        bos_token_id=WORDS.index("<bos>"),
        eos_token_id=EOS,
        pad_token_id=WORDS.index("<pad>"),
        tie_word_embeddings=False,
    )


def build_llama(hidden: int, layers: int, seed: int) -> LlamaForCausalLM:
    """Random-initialised tiny Llama over the shared vocabulary (eval mode)."""
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**_common(hidden, layers, 4))).eval()


def build_qwen2(hidden: int, layers: int, seed: int, vocab_size: int = VOCAB) -> Qwen2ForCausalLM:
    """Random-initialised tiny Qwen2 (attention biases) over ``vocab_size`` ids."""
    torch.manual_seed(seed)
    config = Qwen2Config(**{**_common(hidden, layers, 4), "vocab_size": vocab_size})
    return Qwen2ForCausalLM(config).eval()


def _near_copy(model: LlamaForCausalLM, scale: float, seed: int) -> LlamaForCausalLM:
    generator = torch.Generator().manual_seed(seed)
    copy = LlamaForCausalLM(model.config).eval()
    with torch.no_grad():
        for (_, src), (_, dst) in zip(
            model.named_parameters(), copy.named_parameters(), strict=True
        ):
            noise = torch.randn(src.shape, generator=generator) * src.std() * scale
            dst.copy_(src + noise)
    return copy


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
def tiny_model_dirs(tmp_path_factory, tiny_tokenizer) -> dict[str, Path]:
    target = build_llama(64, 2, seed=1)
    built = {
        "target": target,
        "draft": build_llama(48, 2, seed=2),
        "tiny": build_qwen2(32, 1, seed=3),
        "near": _near_copy(target, scale=0.01, seed=4),
    }
    root = tmp_path_factory.mktemp("models")
    dirs = {}
    for name, model in built.items():
        dirs[name] = root / name
        model.save_pretrained(dirs[name])
        tiny_tokenizer.save_pretrained(dirs[name])
    return dirs


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
