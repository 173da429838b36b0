"""Loading by path, GGUF conversion cache, shared-vocabulary checks, clear errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

import realrun.loading as loading
from realrun.loading import load_model, load_tokenizer, resolve_dtype, select_device
from realrun.tiny import WORDS, build_llama, build_tokenizer
from realrun.vocabulary import check_shared_vocabulary, vocabulary_fingerprint


def _logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def test_load_by_path_reproduces_the_saved_model(tiny_model_dirs):
    loaded = load_model(tiny_model_dirs["target"], name="target")
    assert loaded.name == "target" and loaded.device.type == "cpu"
    assert loaded.dtype == torch.float32 and not loaded.model.training
    assert loaded.vocab_size == len(WORDS) == len(loaded.tokenizer)
    ids = [5, 9, 11, 40, 2]
    np.testing.assert_allclose(
        _logits(loaded.model, ids), _logits(build_llama(64, 2, seed=1), ids), atol=1e-5
    )
    assert load_tokenizer(tiny_model_dirs["target"]).get_vocab() == loaded.tokenizer.get_vocab()


def test_gguf_is_converted_once_and_reused(tiny_gguf, tmp_path, monkeypatch):
    path, original = tiny_gguf
    monkeypatch.setenv("CSD_CACHE", str(tmp_path / "cache"))
    loaded = load_model(path, name="gguf")
    ids = [104, 101, 108, 108, 111, 258]
    np.testing.assert_allclose(_logits(loaded.model, ids), _logits(original, ids), atol=1e-5)
    (entry,) = (tmp_path / "cache").iterdir()
    sha = loading.file_sha256(path)
    assert entry.name == sha[: loading.SHA_PREFIX]
    assert json.loads((entry / loading._MARKER).read_text())["sha256"] == sha
    assert (entry / "model.safetensors").is_file()
    reference = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    assert loaded.tokenizer("hello world")["input_ids"] == reference("hello world")["input_ids"]
    assert loaded.tokenizer.get_vocab() == reference.get_vocab()

    def no_conversion(*args, **kwargs):
        raise AssertionError("the GGUF file was converted a second time")

    stamp = (entry / "model.safetensors").stat().st_mtime_ns
    monkeypatch.setattr(loading.AutoModelForCausalLM, "from_pretrained", no_conversion)
    assert loading.convert_gguf(path) == entry
    assert (entry / "model.safetensors").stat().st_mtime_ns == stamp


def test_unknown_sources_give_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "missing.gguf")
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        load_model("no-such-org/no-such-model-csd")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no config\.json"):
        load_model(tmp_path / "empty")


def _swapped(a: str, b: str):
    words = list(WORDS)
    i, j = words.index(a), words.index(b)
    words[i], words[j] = words[j], words[i]
    return build_tokenizer(words)


def test_shared_vocabulary(tiny_models):
    check_shared_vocabulary({name: m.tokenizer for name, m in tiny_models.items()})
    ours = build_tokenizer()
    with pytest.raises(ValueError, match=r"'big' and 'small' do not share a tokenizer: id \d+ is"):
        check_shared_vocabulary({"big": ours, "small": _swapped("apples", "pens")})
    other = build_tokenizer()
    other.eos_token = "<pad>"
    with pytest.raises(ValueError, match="eos_token is '<eos>' in 'big' but '<pad>' in 'small'"):
        check_shared_vocabulary({"big": ours, "small": other})
    with pytest.raises(ValueError, match="at least one"):
        check_shared_vocabulary({})
    assert vocabulary_fingerprint(ours) == vocabulary_fingerprint(build_tokenizer())
    assert vocabulary_fingerprint(ours) != vocabulary_fingerprint(_swapped("apples", "pens"))


def test_device_and_dtype_choices():
    assert select_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert select_device("cpu") == torch.device("cpu")
    assert resolve_dtype(None, torch.device("cpu")) == torch.float32
    assert resolve_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16
    with pytest.raises(ValueError, match="dtype must be"):
        resolve_dtype("int8", torch.device("cpu"))
    with pytest.raises(ValueError, match="device must be"):
        select_device("tpu:x")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            select_device("cuda")
