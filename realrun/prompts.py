"""Prompt sets for real-model runs: the sets shipped with the project and user JSONL files.

A prompt file is JSON Lines, one object per non-blank line::

    {"id": "math-01", "category": "math", "prompt": "A bakery sells ...", "system": "You are ..."}

``prompt`` (a non-empty string) is required; ``id`` (default ``<file>:<line>``), ``category``
(the kind of task, a name of letters, digits, ``_``, ``-`` and ``.``; default
:data:`UNCATEGORIZED`) and ``system`` (a system message, used only with a chat template) are
optional; other keys are refused so that typos are caught.

Shipped sets (``realrun/prompts/``), written for this project, one category each
(:data:`CATEGORIES`): ``gsm8k_style`` (``math``: word problems in GSM8K's style),
``mmlu_style`` (``mc``: four-option multiple choice in MMLU's style), ``code`` (code writing
and small edits), ``writing`` (open writing), ``translation`` (short texts between English,
French, German, Spanish, Italian and Portuguese), ``summary`` (two-sentence summaries of a
given text of about 600 characters), ``qa`` (short answers to general questions),
``reasoning`` (multi-step logic and puzzles), ``rag`` (answers from a given document of about
2,700 characters) and ``edit`` (code edits whose answer repeats the given code). ``all``
deals every category in turn (:func:`stratified`) so that any first ``n`` prompts mix them;
``classic`` is the first three sets dealt the same way (``all`` before the categories
came: the shipped runs' prompts, and what Max-Gram's bigram fallback is counted over).

Stratified splits. :func:`stratified` deals prompts round-robin over their categories in the
order each first appears, so the first ``k`` prompts hold ``⌊k/C⌋`` or ``⌈k/C⌉`` of each
of ``C`` categories (while a category lasts); a set already dealt that way (``all``,
``classic``) is unchanged. :func:`realrun.pipeline.split_prompts` takes its measuring split
from that deal, optionally leaving whole categories out of it (held-out categories).

:func:`encode` turns a prompt into token ids with the model's chat template when the
tokenizer has one (a user turn, then the assistant generation prompt), else plain text.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ewif.base import validate
from ewif.files.categories import category_name

SHIPPED_DIR = Path(__file__).with_name("prompts")
#: Shipped sets and the category of their prompts.
CATEGORIES = {
    "gsm8k_style": "math",
    "mmlu_style": "mc",
    "code": "code",
    "writing": "writing",
    "translation": "translation",
    "summary": "summary",
    "qa": "qa",
    "reasoning": "reasoning",
    "rag": "rag",
    "edit": "edit",
}
SHIPPED = tuple(CATEGORIES)
#: The sets shipped before categories (what ``classic`` deals).
CLASSIC = SHIPPED[:3]
#: The category of a prompt that names none.
UNCATEGORIZED = "uncategorized"
_KEYS = {"id", "category", "prompt", "system"}


@dataclass(frozen=True)
class Prompt:
    """One prompt: ``id``, the user ``text``, an optional ``system`` message and its
    ``category`` (None: :data:`UNCATEGORIZED`)."""

    id: str
    text: str
    system: str | None = None
    category: str | None = None

    @property
    def kind(self) -> str:
        """The prompt's category, :data:`UNCATEGORIZED` when it names none."""
        return self.category or UNCATEGORIZED


def available() -> tuple[str, ...]:
    """Names accepted by :func:`load_prompts` besides file paths."""
    return (*SHIPPED, "all", "classic")


def categories(prompts: Iterable[Prompt]) -> tuple[str, ...]:
    """The categories of ``prompts`` in the order each first appears."""
    return tuple(dict.fromkeys(p.kind for p in prompts))


def stratified(prompts: Sequence[Prompt]) -> list[Prompt]:
    """``prompts`` dealt round-robin over their categories (module docstring), each
    category's prompts in their given order."""
    groups: dict[str, list[Prompt]] = {}
    for p in prompts:
        groups.setdefault(p.kind, []).append(p)
    dealt = itertools.zip_longest(*groups.values())
    return [p for group in dealt for p in group if p is not None]


def parse_jsonl(text: str, source: str) -> list[Prompt]:
    """Parse JSON Lines; ValueError ``<source>:<line>: <what is wrong>`` on a bad line."""
    prompts: list[Prompt] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        unknown = set(obj) - _KEYS
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        body = obj.get("prompt")
        if not isinstance(body, str) or not body.strip():
            raise ValueError(f"{where}: 'prompt' must be a non-empty string, got {body!r}")
        system = obj.get("system")
        if system is not None and not isinstance(system, str):
            raise ValueError(f"{where}: 'system' must be a string, got {system!r}")
        pid = obj.get("id", where)
        if not isinstance(pid, str) or not pid:
            raise ValueError(f"{where}: 'id' must be a non-empty string, got {pid!r}")
        category = obj.get("category")
        if category is not None:
            try:
                category_name(category)
            except ValueError as exc:
                raise ValueError(f"{where}: 'category': {exc}") from None
        prompts.append(Prompt(pid, body, system, category))
    if not prompts:
        raise ValueError(f"{source}: no prompts (the file is empty)")
    ids = [p.id for p in prompts]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise ValueError(f"{source}: prompt id {dup!r} appears more than once")
    return prompts


def load_prompts(source: str | Path, limit: int | None = None) -> list[Prompt]:
    """The prompts of a shipped set (see :func:`available`) or of a JSONL file path;
    the first ``limit`` of them when given (``limit >= 1``)."""
    if limit is not None:
        limit = validate.count("limit", limit, minimum=1)
    name = str(source)
    if name in ("all", "classic"):
        prompts = stratified(
            [p for s in (SHIPPED if name == "all" else CLASSIC) for p in load_prompts(s)]
        )
    elif name in SHIPPED:
        path = SHIPPED_DIR / f"{name}.jsonl"
        prompts = parse_jsonl(path.read_text(encoding="utf-8"), path.name)
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise ValueError(
                f"prompts {name!r} is neither a shipped set ({', '.join(available())}) "
                "nor an existing JSONL file"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"cannot read prompt file {name!r}: {exc}") from None
        prompts = parse_jsonl(text, str(path))
    return prompts if limit is None else prompts[:limit]


def encode(prompt: Prompt, tokenizer, chat_template: bool = True) -> list[int]:
    """Token ids of ``prompt``: through the tokenizer's chat template when it has one (and
    ``chat_template``), with the assistant generation prompt appended; else the plain text
    with the tokenizer's usual special tokens. ValueError if it encodes to nothing."""
    if not isinstance(prompt, Prompt):
        raise TypeError(f"prompt must be a Prompt, got {type(prompt).__name__}")
    if chat_template and getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": prompt.text}]
        if prompt.system:
            messages.insert(0, {"role": "system", "content": prompt.system})
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(prompt.text)["input_ids"]
    ids = [int(t) for t in ids]
    if not ids:
        raise ValueError(f"prompt {prompt.id!r} encodes to no tokens")
    return ids
