"""The README and docs/ keep their promises: every fenced code block says what it is, and the
Python in them runs.

* ``python`` blocks are executed: ``>>>`` sessions by doctest (their printed output must
  match), plain blocks with ``exec`` (each file's blocks share one namespace, in order);
* ``python skip`` blocks need what a test machine does not have (hub weights, a GPU); their
  first line is a comment saying so;
* ``text`` blocks are output (recorded from real runs), ``bash`` blocks are shell commands
  (the commands themselves are exercised by the CLI tests), a bare block is a diagram;
* ``yaml`` blocks are files: each one in docs/files.md loads as the file it shows (a model
  set or a results file), through the readers every command uses.
"""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```\s*$", re.M | re.S)
BLOCK_KINDS = {"python", "python skip", "text", "bash", "yaml", ""}


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """``(info string, body, line)`` of every fenced block of ``page``."""
    text = page.read_text(encoding="utf-8")
    return [
        (m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1)
        for m in FENCE.finditer(text)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_says_what_it_is(page):
    bad = [f"line {line}: {info!r}" for info, _, line in blocks(page) if info not in BLOCK_KINDS]
    assert bad == [], f"{page.name}: code blocks must be one of {sorted(BLOCK_KINDS)}"
    for info, body, line in blocks(page):
        if info == "python skip":
            assert body.lstrip().startswith("#"), f"{page.name}:{line}: say why it is skipped"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    namespace: dict = {"__name__": "__docs__"}
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for info, body, line in blocks(page):
        if info != "python":
            continue
        if ">>>" in body:
            test = parser.get_doctest(body, namespace, f"{page.name}:{line}", str(page), line)
            result = runner.run(test, clear_globs=False)
            assert result.failed == 0, f"{page.name}:{line}: doctest failed"
        else:
            exec(compile(body, f"{page.name}:{line}", "exec"), namespace)


def test_yaml_examples_load(tmp_path):
    """docs/files.md's hand-written examples are files the project reads: the model set
    with every field, the results file with its model set's run."""
    from ewif.files import model_set as model_io
    from ewif.files import results as results_io

    found = [body for info, body, _ in blocks(ROOT / "docs" / "files.md") if info == "yaml"]
    assert len(found) == 2
    (tmp_path / "set.yaml").write_text(found[0])
    (tmp_path / "run.yaml").write_text(found[1])
    ms = model_io.load(tmp_path / "set.yaml")
    filled = {"cost_curve", "catch_up", "row_cost", "bootstrap", "batch_costs", "cascade"}
    assert all(getattr(ms, name) is not None for name in filled)
    assert ms.models == ("big", "small", "mag") and ms.leniences == (1.0, 3.0)
    assert ms.to_cascade().ewif() > 1.0  # the section's cascade evaluates
    run = results_io.load(tmp_path / "run.yaml")
    assert run.method("CSD small [[3]]").prediction_error is not None
    assert run.meta.intervals["CSD small [[3]]"].held_out_prompts == run.prompts
