"""Shipped prompt sets, user JSONL files (clear errors for bad lines), chat-template encoding."""

from __future__ import annotations

import json

import pytest

from realrun.prompts import SHIPPED, Prompt, available, encode, load_prompts, parse_jsonl


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_sets_have_at_least_ten_distinct_prompts(name):
    prompts = load_prompts(name)
    assert len(prompts) >= 10
    assert len({p.id for p in prompts}) == len(prompts)
    assert all(p.text.strip() for p in prompts)


def test_all_interleaves_the_sets_and_limit_takes_the_first():
    prompts = load_prompts("all")
    assert len(prompts) == sum(len(load_prompts(s)) for s in SHIPPED)
    assert [p.id.split("-")[0] for p in prompts[:6]] == ["math", "mc", "code"] * 2
    assert load_prompts("all", limit=4) == prompts[:4]
    assert "all" in available()


def test_user_file_is_read(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(
        json.dumps({"prompt": "hello", "system": "be brief"})
        + "\n\n"
        + json.dumps({"id": "b", "prompt": "world"})
        + "\n"
    )
    prompts = load_prompts(path)
    assert prompts == [Prompt(f"{path}:1", "hello", "be brief"), Prompt("b", "world")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"prompt": "a"}\n{"prompt": ', ":2: not valid JSON"),
        ('["a"]', ":1: expected a JSON object"),
        ('{"prompt": ""}', ":1: 'prompt' must be a non-empty string"),
        ('{"text": "a"}', ":1: unknown keys ['text']"),
        ('{"prompt": "a", "system": 3}', ":1: 'system' must be a string"),
        ('{"id": "x", "prompt": "a"}\n{"id": "x", "prompt": "b"}', "appears more than once"),
        ("\n\n", "no prompts"),
    ],
)
def test_bad_lines_name_file_line_and_problem(text, message):
    with pytest.raises(ValueError, match=r"f\.jsonl") as info:
        parse_jsonl(text, "f.jsonl")
    assert message in str(info.value)


def test_unknown_set_or_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="neither a shipped set"):
        load_prompts(tmp_path / "nope.jsonl")
    with pytest.raises(ValueError, match="limit"):
        load_prompts("code", limit=0)


def test_encode_plain_without_chat_template(tiny_tokenizer):
    ids = encode(Prompt("p", "tom has five apples"), tiny_tokenizer)
    assert ids == tiny_tokenizer("tom has five apples")["input_ids"]


def test_encode_applies_the_chat_template(tiny_tokenizer):
    tok = (
        tiny_tokenizer.__class__.from_pretrained(tiny_tokenizer.name_or_path)
        if tiny_tokenizer.name_or_path
        else tiny_tokenizer
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} . {% endfor %}"
        "{% if add_generation_prompt %}answer :{% endif %}"
    )
    ids = encode(Prompt("p", "how many apples ?", system="be brief"), tok)
    words = tok.convert_ids_to_tokens(ids)
    assert words[-2:] == ["answer", ":"]
    assert "how" in words
    assert (
        encode(Prompt("p", "how many apples ?"), tok, chat_template=False)
        == tok("how many apples ?")["input_ids"]
    )


def test_encode_refuses_prompts_that_encode_to_nothing(tiny_tokenizer):
    with pytest.raises(ValueError, match="encodes to no tokens"):
        encode(Prompt("p", "   "), tiny_tokenizer)
    with pytest.raises(TypeError, match="Prompt"):
        encode("text", tiny_tokenizer)
