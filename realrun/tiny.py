"""Tiny random-initialised models sharing one word-level tokenizer: demos and tests.

Nothing is downloaded. :func:`build_tokenizer` makes a WordLevel tokenizer over
:data:`WORDS`; :func:`build_llama` / :func:`build_qwen2` random models over that vocabulary;
:func:`near_copy` a noisy copy of a model (a drafter that is often accepted);
:func:`write_family` saves such a family as model directories; :func:`write_gguf` writes a
tiny Qwen2 as a GGUF file (byte-level BPE tokenizer) for the llama.cpp backend.
:func:`demo_results` runs the whole ``csd realrun`` pipeline — measure α and c, recommend,
run every method with the baselines — on such a family, in seconds (notebook 03 uses it
when no results file is given).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from ewif.files.results import Results

SPECIALS = ["<unk>", "<bos>", "<eos>", "<pad>"]
WORDS = (
    SPECIALS
    + (
        "the a an of to in is are was be and or not if then so that this it he she they we you "
        "i one two three four five six seven eight nine ten zero plus minus times equals half "
        "apples pens books cats dogs boxes coins miles hours days cost costs buys sells has have "
        "had does tom gives takes more less many much each every total left how what which why "
        "answer "
        "question step first second third next finally therefore because number numbers sum "
        "product def return print for while list int x y z n = + - * / ( ) : , . ? ! 0 1 2 3 4 5 "
        "6 7 8 9 red blue green big small old new fast slow run walk eat read write code python"
    ).split()
)
VOCAB = len(WORDS)
EOS = WORDS.index("<eos>")

PROMPT_TEXTS = [
    "tom has five apples and buys three more apples . how many apples does tom have ? tom has",
    "def sum ( x , y ) : return x + y",
    "which number is more : seven or nine ? the answer is",
    "a big red dog and a small blue cat run fast . the big red dog",
]


def build_tokenizer(words: Sequence[str] = WORDS) -> PreTrainedTokenizerFast:
    """WordLevel tokenizer over ``words`` (token id = index), :data:`WORDS` by default."""
    vocab = {w: i for i, w in enumerate(words)}
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


def near_copy(model: LlamaForCausalLM, scale: float, seed: int) -> LlamaForCausalLM:
    """The model's weights plus Gaussian noise of ``scale`` × each tensor's std: a drafter
    that agrees with ``model`` most of the time (a model of the same class)."""
    generator = torch.Generator().manual_seed(seed)
    copy = type(model)(model.config).eval()
    with torch.no_grad():
        for (_, src), (_, dst) in zip(
            model.named_parameters(), copy.named_parameters(), strict=True
        ):
            noise = torch.randn(src.shape, generator=generator) * src.std() * scale
            dst.copy_(src + noise)
    return copy


def write_family(root: Path) -> dict[str, Path]:
    """Save the tiny family under ``root``: ``target`` (Llama, hidden 64), ``draft`` (an
    independent Llama, hidden 48), ``tiny`` (Qwen2, hidden 32) and ``near`` (the target's
    noisy copy), each a ``save_pretrained`` directory with the shared tokenizer."""
    tokenizer = build_tokenizer()
    target = build_llama(64, 2, seed=1)
    built = {
        "target": target,
        "draft": build_llama(48, 2, seed=2),
        "tiny": build_qwen2(32, 1, seed=3),
        "near": near_copy(target, scale=0.01, seed=4),
    }
    dirs = {}
    for name, model in built.items():
        dirs[name] = Path(root) / name
        model.save_pretrained(dirs[name])
        tokenizer.save_pretrained(dirs[name])
    return dirs


def demo_results(max_new_tokens: int = 12, progress: bool = False) -> Results:
    """Measure, recommend and run (all methods, greedy) on a tiny family: target (Llama,
    hidden 64), ``near`` (its noisy copy), ``draft`` (an independent Llama, hidden 48) and
    Max-Gram, over :data:`PROMPT_TEXTS`. Timings are real but of toy models."""
    from realrun.bigram import BigramTable
    from realrun.hf_model import HFTokenModel
    from realrun.maxgram import MaxGram
    from realrun.measure import measure
    from realrun.methods import default_methods
    from realrun.side_by_side import run_side_by_side

    tokenizer = build_tokenizer()
    target = build_llama(64, 2, seed=1)
    family = {
        "target": HFTokenModel(target, "target"),
        "near": HFTokenModel(near_copy(target, scale=0.01, seed=4), "near"),
        "draft": HFTokenModel(build_llama(48, 2, seed=2), "draft"),
        "mag": MaxGram(BigramTable.from_corpus(PROMPT_TEXTS, tokenizer)),
    }
    prompts = [tokenizer(text)["input_ids"] for text in PROMPT_TEXTS]
    chain = [family[n] for n in ("target", "near", "draft", "mag")]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # toy passes take ~1 ms: more threads only add timing noise
    try:
        model_set = measure(
            chain,
            prompts[:2],
            max_new_tokens=max_new_tokens,
            leniences=(1.0, 3.0),
            max_m=4,
            repeats=7,
            warmup=3,
            progress=progress,
        )
        methods = default_methods(model_set, assistants=["near", "draft"], k_max=4)
        return run_side_by_side(
            methods,
            family,
            prompts,
            model_set=model_set,
            max_new_tokens=max_new_tokens,
            eos_token_id=EOS,
            family="tiny random models",
            progress=progress,
        )
    finally:
        torch.set_num_threads(threads)


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
