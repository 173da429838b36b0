"""One vocabulary per cascade: the cascade passes token ids between its models.

:func:`check_shared_vocabulary` compares the token->id maps and the special tokens (BOS,
EOS, UNK) of the models' tokenizers and names the first difference;
:func:`vocabulary_fingerprint` is a digest that is equal exactly when the check would pass
(bigram tables carry it). Pure Python: no torch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

_SPECIAL = ("bos_token", "eos_token", "unk_token")


def check_shared_vocabulary(tokenizers: Mapping[str, Any]) -> None:
    """Raise ValueError unless all tokenizers (keyed by model name) map the same tokens to
    the same ids and agree on BOS, EOS and UNK; the message names both models and the
    first difference (the smallest differing id, or the first differing special token).
    Padding is not compared: at batch size 1 nothing is padded."""
    items = list(tokenizers.items())
    if not items:
        raise ValueError("check_shared_vocabulary needs at least one tokenizer, got none")
    ref_name, ref = items[0]
    ref_vocab = ref.get_vocab()
    for other_name, other in items[1:]:
        vocab = other.get_vocab()
        if vocab != ref_vocab:
            raise ValueError(
                f"models {ref_name!r} and {other_name!r} do not share a tokenizer: "
                f"{_first_difference(ref_vocab, vocab, ref_name, other_name)}"
            )
        for special in _SPECIAL:
            a, b = getattr(ref, special, None), getattr(other, special, None)
            if a != b:
                raise ValueError(
                    f"models {ref_name!r} and {other_name!r} do not share a tokenizer: "
                    f"{special} is {a!r} in {ref_name!r} but {b!r} in {other_name!r}"
                )


def vocabulary_fingerprint(tokenizer: Any) -> str:
    """sha256 (hex) of the token->id map and the special tokens; equal fingerprints mean
    :func:`check_shared_vocabulary` would accept the pair."""
    payload = {
        "vocab": sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1]),
        "special": [getattr(tokenizer, s, None) for s in _SPECIAL],
    }
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode()).hexdigest()


def _first_difference(a: dict[str, int], b: dict[str, int], name_a: str, name_b: str) -> str:
    by_id_a = {i: t for t, i in a.items()}
    by_id_b = {i: t for t, i in b.items()}
    for token_id in sorted(set(by_id_a) | set(by_id_b)):
        ta, tb = by_id_a.get(token_id), by_id_b.get(token_id)
        if ta != tb:
            return (
                f"id {token_id} is {ta!r} in {name_a!r} but {tb!r} in {name_b!r} "
                f"(vocabulary sizes {len(a)} and {len(b)})"
            )
    return f"a token maps to two ids; vocabulary sizes {len(a)} and {len(b)}"
