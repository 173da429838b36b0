"""One vocabulary per cascade: the cascade passes token ids between its models.

Every shared-vocabulary check of the project lives here:

* :func:`check_shared_vocabulary` — transformers tokenizers: the token->id maps and the
  special tokens (BOS, EOS, UNK);
* :func:`check_gguf_vocabularies` — llama.cpp models: the token texts by id and the BOS and
  EOS ids, as llama.cpp reads them from the GGUF files;
* :func:`check_logit_width` — the loaded models (any backend, Max-Gram included): one logit
  width, the ``vocab_size`` the decoder samples over.

The first two name both models and the first difference (the smallest differing id, or the
first differing special token). :func:`vocabulary_fingerprint` is a digest that is equal
exactly when :func:`check_shared_vocabulary` would pass (bigram tables carry it). Pure
Python: no torch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

_SPECIAL = ("bos_token", "eos_token", "unk_token")


def check_shared_vocabulary(tokenizers: Mapping[str, Any]) -> None:
    """Raise ValueError unless all tokenizers (keyed by model name) map the same tokens to
    the same ids and agree on BOS, EOS and UNK. Padding is not compared: at batch size 1
    nothing is padded."""
    if not tokenizers:
        raise ValueError("check_shared_vocabulary needs at least one tokenizer, got none")
    _check_same(
        "tokenizer",
        {name: tok.get_vocab() for name, tok in tokenizers.items()},
        {name: {s: getattr(tok, s, None) for s in _SPECIAL} for name, tok in tokenizers.items()},
        by_id=lambda vocab: {i: t for t, i in vocab.items()},
    )


def check_gguf_vocabularies(
    vocabularies: Mapping[str, tuple[Sequence[bytes], int, int]],
) -> None:
    """Raise ValueError unless all GGUF vocabularies ``(token texts by id, BOS id, EOS id)``
    (keyed by model name, as ``LlamaCppTokenModel.vocabulary()`` gives them) are equal."""
    _check_same(
        "vocabulary",
        {name: dict(enumerate(texts)) for name, (texts, _, _) in vocabularies.items()},
        {name: {"BOS id": bos, "EOS id": eos} for name, (_, bos, eos) in vocabularies.items()},
        by_id=dict,
    )


def check_logit_width(models: Sequence[Any]) -> None:
    """Raise ValueError unless every model (a ``TokenModel`` or ``Proposer``) has one
    ``vocab_size``: the decoder compares their distributions position by position."""
    if len({m.vocab_size for m in models}) > 1:
        raise ValueError(
            "models must share one vocabulary: vocab sizes "
            + ", ".join(f"{m.name}={m.vocab_size}" for m in models)
        )


def vocabulary_fingerprint(tokenizer: Any) -> str:
    """sha256 (hex) of the token->id map and the special tokens; equal fingerprints mean
    :func:`check_shared_vocabulary` would accept the pair."""
    payload = {
        "vocab": sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]),
        "special": [getattr(tokenizer, s, None) for s in _SPECIAL],
    }
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


def _check_same(
    what: str,
    vocabularies: Mapping[str, Mapping[Any, Any]],
    special: Mapping[str, Mapping[str, object]],
    by_id: Callable[[Mapping[Any, Any]], Mapping[int, object]],
) -> None:
    """Compare every model's vocabulary (a mapping, compared whole) and special tokens with
    the first model's; ValueError naming both models and the first difference
    (``by_id(vocabulary)``: its tokens by id)."""
    ref_name, ref = next(iter(vocabularies.items()))
    for name, vocab in vocabularies.items():
        if vocab != ref:
            where = _first_difference(by_id(ref), by_id(vocab), ref_name, name)
            raise ValueError(
                f"models {ref_name!r} and {name!r} do not share a {what}: {where} "
                f"(vocabulary sizes {len(ref)} and {len(vocab)})"
            )
        for key, value in special[name].items():
            if value != special[ref_name][key]:
                raise ValueError(
                    f"models {ref_name!r} and {name!r} do not share a {what}: {key} is "
                    f"{special[ref_name][key]!r} in {ref_name!r} but {value!r} in {name!r}"
                )


def _first_difference(
    a: Mapping[int, object], b: Mapping[int, object], name_a: str, name_b: str
) -> str:
    """Where ``a`` and ``b`` (tokens by id) first differ: the smallest such id."""
    for token_id in sorted(set(a) | set(b)):
        ta, tb = a.get(token_id), b.get(token_id)
        if ta != tb:
            return (
                f"id {token_id} is {ta!r} in {name_a!r} but {tb!r} in {name_b!r}, "
                f"the first difference at id {token_id}"
            )
    return "a token maps to two ids"
