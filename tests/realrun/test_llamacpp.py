"""LlamaCppTokenModel on tiny random GGUF files (written with the ``gguf`` package): the cache
contract (rollback == recomputation), the model it computes (== the transformers model the
file encodes), greedy cascades == llama.cpp's own autoregressive output, counters, bad input,
and ``csd measure``/``csd realrun --backend llama.cpp`` end to end.

``.ci/run`` installs llama-cpp-python (benchmarks/build_llamacpp_wheel.sh), so in CI these
tests always run; the skip below only spares a checkout without the ``llamacpp`` extra.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ewif.cli import main
from ewif.files import model_set as model_io
from ewif.files import results as results_io
from realrun.bigram import BigramTable
from realrun.family import load_family
from realrun.llamacpp_model import (
    LlamaCppTokenModel,
    amx_active,
    gguf_tokenizer,
    load_gguf_models,
)
from realrun.maxgram import MaxGram
from realrun.tiny import PROMPT_TEXTS, build_qwen2, write_gguf
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.interface import TokenModel
from simulate.decoder.sampling import Decoding

pytest.importorskip("llama_cpp")

VOCAB = 259
EOS = 258
NEW = 16


def _noisy_copy(model, scale: float, seed: int):
    """``model`` plus Gaussian noise of ``scale`` × each tensor's std (a close drafter)."""
    generator = torch.Generator().manual_seed(seed)
    copy = type(model)(model.config).eval()
    with torch.no_grad():
        for src, dst in zip(model.parameters(), copy.parameters(), strict=True):
            dst.copy_(src + torch.randn(src.shape, generator=generator) * src.std() * scale)
    return copy


@pytest.fixture(scope="module")
def ggufs(tiny_gguf, tmp_path_factory) -> dict:
    """name -> path: ``target`` (the conftest's qwen2), ``near`` (its noisy copy) and
    ``draft`` (an independent, smaller qwen2), all over the same 259-token vocabulary."""
    root = tmp_path_factory.mktemp("llamacpp")
    path, model = tiny_gguf
    return {
        "target": path,
        "near": write_gguf(_noisy_copy(model, 0.01, seed=3), root / "near.gguf"),
        "draft": write_gguf(build_qwen2(16, 1, seed=7, vocab_size=VOCAB), root / "draft.gguf"),
    }


@pytest.fixture(scope="module")
def models(ggufs) -> dict[str, LlamaCppTokenModel]:
    return {
        name: LlamaCppTokenModel(path, name, n_ctx=256, n_threads=1) for name, path in ggufs.items()
    }


@pytest.fixture(scope="module")
def prompts(ggufs) -> list[list[int]]:
    tokenizer = gguf_tokenizer(ggufs["target"])
    return [tokenizer(text)["input_ids"] for text in PROMPT_TEXTS[:3]]


# a call: (length, n, how many trailing tokens to overwrite, seed of the overwrite)
calls = st.lists(
    st.tuples(st.integers(1, 40), st.integers(1, 6), st.integers(0, 5), st.integers(0, 99)),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(base=st.lists(st.integers(0, VOCAB - 1), min_size=40, max_size=40), plan=calls)
def test_rollback_equals_recompute(models, ggufs, base, plan):
    lm = LlamaCppTokenModel(ggufs["target"], "target", n_ctx=64, n_threads=1)
    scratch = models["target"]
    for length, n, changed, seed in plan:
        tokens = list(base[:length])
        rng = np.random.default_rng(seed)
        for i in range(max(0, length - changed), length):
            tokens[i] = int(rng.integers(VOCAB))
        n = min(n, length)
        got = lm.logits(tokens, n)
        assert got.dtype == np.float32 and got.shape == (n, VOCAB)
        scratch.reset()
        # float16 KV cache: a value rounded on the other side of a float16 step moves a
        # logit by ~1e-4 of its scale
        np.testing.assert_allclose(got, scratch.logits(tokens, n), rtol=1e-3, atol=1e-4)
        assert lm.cached_length == length
    lm.close()


def test_computes_the_model_the_file_encodes(tiny_gguf, models):
    """Same scores as transformers on the float32 model the GGUF was written from."""
    _, model = tiny_gguf
    tokens = list(range(5, 45))
    with torch.no_grad():
        want = model(torch.tensor([tokens])).logits[0, -8:].numpy()
    models["target"].reset()
    got = models["target"].logits(tokens, 8)
    # float16 KV cache (llama.cpp's default): ~3 significant digits in attention
    assert np.abs(got - want).max() < 0.02 * np.abs(want).max()
    assert (got.argmax(-1) == want.argmax(-1)).all()


def test_counters_follow_the_cache_contract(ggufs):
    seen = []
    lm = LlamaCppTokenModel(
        ggufs["draft"],
        "draft",
        n_ctx=64,
        n_threads=1,
        timing_hook=lambda fed, s: seen.append((fed, s)),
    )
    seq = list(range(4, 16))
    lm.logits(seq[:10], 1)  # from scratch: 10 fed
    lm.logits(seq[:12], 2)  # keeps 10, feeds 2
    lm.logits(seq[:12], 3)  # keeps only 9 (the last 3 are re-fed)
    lm.logits([*seq[:8], 99, 98, 97], 1)  # common prefix 8: rollback, feeds 3
    lm.logits([50, *seq[:5]], 1)  # nothing in common: 6
    assert lm.passes == 5 and [f for f, _ in seen] == [10, 2, 3, 3, 6]
    assert lm.tokens_fed == 24 and all(s > 0 for _, s in seen)
    assert lm.pass_sizes == {10: 1, 2: 1, 3: 2, 6: 1}
    lm.reset_counters()
    lm.reset()
    lm.logits(seq[:3], 1)
    assert (lm.passes, lm.tokens_fed, lm.cached_length) == (1, 3, 3)
    lm.set_threads(2, 1)
    assert (lm.n_threads, lm.n_threads_batch) == (2, 1)
    lm.close()


def test_is_a_token_model(models, ggufs):
    lm = models["draft"]
    assert isinstance(lm, TokenModel) and lm.vocab_size == VOCAB and lm.name == "draft"
    assert lm.file_type == "F32"
    assert LlamaCppTokenModel(ggufs["draft"], n_ctx=8).name == "draft.gguf"


@pytest.mark.parametrize(
    ("tokens", "n", "match"),
    [
        ([1, 2], 0, "n must be"),
        ([1, 2], 3, r"n must be in \[1, len\(tokens\)=2\]"),
        ([], 1, "n must be"),
        ([1, VOCAB], 1, r"tokens must be ids in \[0, 258\]"),
        ([1, -1], 1, "tokens must be ids"),
        (list(range(20)), 9, "max_outputs=8"),
        (list(range(40)), 1, "n_ctx=32"),
    ],
)
def test_bad_calls(ggufs, tokens, n, match):
    lm = LlamaCppTokenModel(ggufs["draft"], "d", n_ctx=32, max_outputs=8, n_threads=1)
    with pytest.raises(ValueError, match=match):
        lm.logits(tokens, n)
    lm.close()


def test_bad_construction(ggufs, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"missing\.gguf"):
        LlamaCppTokenModel(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(ValueError, match="could not load"):
        LlamaCppTokenModel(bad)
    for kwargs, match in [
        ({"name": ""}, "name"),
        ({"n_ctx": 0}, "n_ctx"),
        ({"n_threads": 0}, "n_threads"),
        ({"max_outputs": 0}, "max_outputs"),
    ]:
        with pytest.raises(ValueError, match=match):
            LlamaCppTokenModel(ggufs["draft"], **kwargs)
    with pytest.raises(ValueError, match="dtype must be 'auto'"):
        load_gguf_models([str(ggufs["draft"])], dtype="float32")
    with pytest.raises(ValueError, match=r"loads \.gguf files"):
        load_gguf_models([str(tmp_path)])
    with pytest.raises(ValueError, match="backend must be one of"):
        load_family([str(ggufs["draft"])], backend="vllm")


def test_family_shares_one_vocabulary(ggufs, monkeypatch):
    models, tokenizer = load_gguf_models([str(ggufs["target"]), str(ggufs["draft"])])
    assert [m.name for m in models] == ["tiny-qwen2.gguf", "draft.gguf"]
    texts, bos, eos = models[0].vocabulary()
    assert len(texts) == VOCAB and (bos, eos) == (EOS, EOS) == (EOS, tokenizer.eos_token_id)
    real = LlamaCppTokenModel.vocabulary

    def other(self):
        texts, bos, eos = real(self)
        if self.name == "draft.gguf":
            texts = (*texts[:7], b"x", *texts[8:])
        return texts, bos, eos

    monkeypatch.setattr(LlamaCppTokenModel, "vocabulary", other)
    with pytest.raises(ValueError, match=r"do not share a vocabulary: .* at id 7"):
        load_gguf_models([str(ggufs["target"]), str(ggufs["draft"])])


CONFIGS = {
    "sd-draft": (["draft"], [[3]], 1.0),
    "sd-mag": (["mag"], [[4]], 1.0),
    "vertical-2": (["near", "mag"], [[4, 0], [0, 3]], 2.0),
    "cascade-3": (["near", "draft", "mag"], [[3, 1, 0], [0, 2, 0], [0, 0, 3]], 3.0),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_greedy_cascade_equals_llamacpp_autoregressive(config, models, prompts, ggufs):
    greedy = Decoding(temperature=0.0)
    target = models["target"]
    ar = CascadeDecoder([target], np.zeros((0, 0), int), decoding=greedy)
    reference = [ar.generate(p, NEW, EOS).tokens for p in prompts]
    names, K, lenience = CONFIGS[config]
    tokenizer = gguf_tokenizer(ggufs["target"])
    bigram = BigramTable.from_corpus(PROMPT_TEXTS, tokenizer, vocab_size=VOCAB)
    chain = [target] + [MaxGram(bigram) if n == "mag" else models[n] for n in names]
    for m in chain:
        if isinstance(m, LlamaCppTokenModel):
            m.reset_counters()
    decoder = CascadeDecoder(chain, K, lenience=lenience, decoding=greedy)
    accepted = 0
    for prompt, want in zip(prompts, reference, strict=True):
        result = decoder.generate(prompt, NEW, EOS)
        assert result.tokens == want, (config, prompt)
        accepted += sum(result.stats.accepted_lengths) - result.stats.target_steps
        for i, m in enumerate(chain):  # the models counted exactly the cascade's passes
            if isinstance(m, LlamaCppTokenModel):
                assert (m.passes, m.tokens_fed) == (
                    result.stats.passes[i],
                    result.stats.tokens_fed[i],
                )
                m.reset_counters()
    if "near" in names:
        assert accepted > 0  # drafts really were accepted, so rollback was exercised


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("prompts") / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in PROMPT_TEXTS))
    return path


def test_cli_measure_and_realrun(ggufs, prompt_file, tmp_path, capsys):
    family = [str(ggufs["target"]), str(ggufs["near"])]
    measured = tmp_path / "m.json"
    common = [
        "--backend",
        "llama.cpp",
        "--prompts",
        str(prompt_file),
        "--max-new-tokens",
        "6",
        "--k-max",
        "3",
        "--threads",
        "1",
    ]
    assert (
        main(
            [
                "measure",
                *family,
                "--mag",
                *common,
                "--limit",
                "2",
                "--leniences",
                "1",
                "--repeats",
                "1",
                "--warmup",
                "0",
                "-o",
                str(measured),
            ]
        )
        == 0
    )
    ms = model_io.load(measured)
    assert ms.models == ("tiny-qwen2.gguf", "near.gguf", "mag")
    repack = ", no repack (AMX)" if amx_active() else ""  # AMX machines: module doc
    assert ms.metadata["dtype"] == f"gguf:F32{repack}"
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "realrun",
                *family,
                "--mag",
                *common,
                "--measure-prompts",
                "2",
                "--limit",
                "2",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    res = results_io.load(out)
    kinds = {m.kind for m in res.methods}
    assert "autoregressive" in kinds and "csd" in kinds
    assert not any(k.startswith("hf-") for k in kinds)  # transformers baselines left out
    assert res.metadata["backend"] == "llama.cpp" and res.prompts == 2
    assert set(res.metadata["outputs_differing_from_AR"].values()) == {0}
    capsys.readouterr()
    assert (
        main(
            [
                "realrun",
                *family,
                "--backend",
                "llama.cpp",
                "--dtype",
                "float16",
                "--prompts",
                str(prompt_file),
                "--measure-prompts",
                "2",
            ]
        )
        == 2
    )
    assert "dtype must be 'auto'" in capsys.readouterr().err
