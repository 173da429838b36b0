"""Shipped prompt sets and their categories, the stratified deal, user JSONL files (clear
errors for bad lines), chat-template encoding."""

from __future__ import annotations

import json
import statistics
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.prompts import (
    CATEGORIES,
    CLASSIC,
    SHIPPED,
    UNCATEGORIZED,
    Prompt,
    available,
    categories,
    encode,
    load_prompts,
    parse_jsonl,
    stratified,
)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_sets_have_at_least_ten_distinct_prompts(name):
    prompts = load_prompts(name)
    assert len(prompts) >= 10
    assert len({p.id for p in prompts}) == len(prompts)
    assert all(p.text.strip() for p in prompts)


def test_all_deals_every_category_and_limit_takes_the_first():
    prompts = load_prompts("all")
    assert len(prompts) == sum(len(load_prompts(s)) for s in SHIPPED)
    assert [p.kind for p in prompts[:10]] == list(CATEGORIES.values())
    assert load_prompts("all", limit=4) == prompts[:4]
    assert "all" in available() and "classic" in available()


def test_classic_is_the_three_sets_as_they_were_dealt_before_categories():
    prompts = load_prompts("classic")
    assert len(prompts) == sum(len(load_prompts(s)) for s in CLASSIC) == 73
    assert [p.id.split("-")[0] for p in prompts[:6]] == ["math", "mc", "code"] * 2
    assert [p.id for p in prompts[-2:]] == ["code-24", "math-25"]


def test_shipped_prompts_span_ten_categories_of_at_least_twelve_each():
    every = load_prompts("all")
    assert len({p.id for p in every}) == len(every)  # ids unique across the sets
    for name, kind in CATEGORIES.items():
        prompts = load_prompts(name)
        assert {p.category for p in prompts} == {kind}
        assert len(prompts) >= 12
        assert all(p.id.startswith(f"{kind}-") for p in prompts)
    assert len(set(CATEGORIES.values()) - {"math", "mc", "code"}) >= 6


def test_long_context_and_editing_prompts_are_what_they_say():
    rag = load_prompts("rag")
    documents = [p.text.split("Document:\n", 1)[1].split("\n\nQuestion:")[0] for p in rag]
    assert 2400 <= statistics.mean(len(d) for d in documents) <= 3000
    assert min(len(d) for d in documents) >= 2000
    edits = load_prompts("edit")
    assert all("unchanged otherwise" in p.text and p.text.count("\n") >= 15 for p in edits)


def _prompts(kinds: list[str]) -> list[Prompt]:
    return [Prompt(f"p{i}", "text", category=k) for i, k in enumerate(kinds)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=30))
def test_stratified_deals_categories_in_turn_keeping_each_ones_order(kinds):
    prompts = _prompts(kinds)
    dealt = stratified(prompts)
    assert sorted(p.id for p in dealt) == sorted(p.id for p in prompts)
    for kind in set(kinds):  # each category keeps its order
        assert [p for p in dealt if p.kind == kind] == [p for p in prompts if p.kind == kind]
    sizes = Counter(kinds)
    for k in range(1, len(dealt) + 1):  # any first k: balanced among categories not exhausted
        counts = Counter(p.kind for p in dealt[:k])
        open_ = [counts[c] for c in sizes if counts[c] < sizes[c]]
        if open_:
            assert max(counts.values()) - min(open_) <= 1
    assert stratified(dealt) == dealt
    assert categories(dealt) == tuple(dict.fromkeys(kinds))


def test_a_prompt_without_category_is_uncategorized():
    (p,) = parse_jsonl('{"prompt": "a"}', "f.jsonl")
    assert p.category is None and p.kind == UNCATEGORIZED
    (q,) = parse_jsonl('{"prompt": "a", "category": "rag"}', "f.jsonl")
    assert q.kind == "rag"


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
        ('{"prompt": "a", "category": "a b"}', ":1: 'category': a category name is"),
        ('{"prompt": "a", "category": 3}', ":1: 'category': a category name is"),
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
