"""Greedy CascadeDecoder on tiny HF models (+ Max-Gram) == the target's own ``generate``.

Models: the target, two smaller random models (``draft``: Llama 48, ``tiny``: Qwen2 32),
``near`` (a noisy copy of the target, so long chunks get accepted) and Max-Gram; SD and
2- and 3-level cascades, vertical and horizontal, lenience > 1 below the target.
"""

from __future__ import annotations

import pytest
import torch

from realrun.bigram import BigramTable
from realrun.hf_model import HFTokenModel
from realrun.maxgram import MaxGram
from realrun.tiny import EOS
from simulate.decoder.cascade import CascadeDecoder
from simulate.decoder.sampling import Decoding

NEW = 16
CONFIGS = {
    "sd-draft": (["draft"], [[3]], 1.0),
    "sd-mag": (["mag"], [[4]], 1.0),
    "vertical-2": (["near", "mag"], [[4, 0], [0, 3]], 2.0),
    "horizontal-2": (["near", "tiny"], [[2, 2], [0, 0]], 1.0),
    "cascade-3": (["near", "draft", "mag"], [[3, 1, 0], [0, 2, 0], [0, 0, 3]], 3.0),
}


@pytest.fixture(scope="module")
def reference(tiny_models, tiny_prompts):
    target = tiny_models["target"].model
    out = []
    for prompt in tiny_prompts[:3]:
        with torch.no_grad():
            ids = target.generate(
                torch.tensor([prompt]), max_new_tokens=NEW, do_sample=False, eos_token_id=EOS
            )
        out.append(ids[0, len(prompt) :].tolist())
    return out


@pytest.mark.parametrize("config", list(CONFIGS))
def test_greedy_cascade_equals_target_generate(config, tiny_models, tiny_prompts, reference):
    names, K, lenience = CONFIGS[config]
    bigram = BigramTable.from_corpus(
        [tiny_models["target"].tokenizer.decode(p) for p in tiny_prompts],
        tiny_models["target"].tokenizer,
    )
    models = [HFTokenModel(tiny_models["target"].model, "target")]
    for name in names:
        model = MaxGram(bigram) if name == "mag" else HFTokenModel(tiny_models[name].model, name)
        models.append(model)
    decoder = CascadeDecoder(models, K, lenience=lenience, decoding=Decoding(temperature=0.0))
    accepted = 0
    for prompt, want in zip(tiny_prompts[:3], reference, strict=True):
        result = decoder.generate(prompt, NEW, eos_token_id=EOS)
        assert result.tokens == want, (config, prompt)
        accepted += sum(result.stats.accepted_lengths) - result.stats.target_steps
        # the HF models counted exactly the passes the cascade made
        for i, m in enumerate(models):
            if isinstance(m, HFTokenModel):
                assert m.passes == result.stats.passes[i]
                assert m.tokens_fed == result.stats.tokens_fed[i]
                m.reset_counters()
    if "near" in names:
        assert accepted > 0  # drafts really were accepted, so rollback was exercised
