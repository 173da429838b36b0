"""The house rules a test can check: imports point one way (ewif ← simulate ← realrun; ewif
and simulate never import torch), and no module is shadowed by a function or other object of
the same dotted name (``import ewif.x`` and ``ewif.x`` must be the same module)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ewif", "simulate", "realrun")
#: What each layer may not import (top-level package names).
FORBIDDEN = {
    "ewif": {"simulate", "realrun", "torch", "transformers", "llama_cpp"},
    "simulate": {"realrun", "torch", "transformers", "llama_cpp"},
    "realrun": set(),
}


def imported_packages(path: Path) -> set[str]:
    """Top-level names of every ``import``/``from ... import`` in a file (relative: none)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    bad = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[package])
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_checker_sees_a_forbidden_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import numpy\nfrom realrun.side_by_side import run_side_by_side\nfrom . import sibling\n"
    )
    assert imported_packages(bad) == {"numpy", "realrun"}


def modules(package: str) -> list[str]:
    root = importlib.import_module(package)
    return [m.name for m in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_shadowed_by_an_attribute_of_its_parent(package):
    shadowed = []
    for name in modules(package):
        module = importlib.import_module(name)
        parent, _, leaf = name.rpartition(".")
        attr = getattr(importlib.import_module(parent), leaf)
        if not isinstance(attr, types.ModuleType) or attr is not module:
            shadowed.append(f"{name} is {type(attr).__name__} {attr!r:.60}")
    assert shadowed == []


def test_shipped_results_name_no_absolute_path_of_the_machine_that_ran_them():
    import re

    absolute = re.compile(r'"(/(?:root|home|tmp|work|Users|var|opt|mnt)/[^"]*)"')
    found = {
        path.name: absolute.findall(path.read_text(encoding="utf-8"))[:3]
        for path in sorted((ROOT / "realrun" / "data").glob("*.json"))
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_architecture_page_lists_every_module():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        name
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if f"`{(name := '.'.join(path.relative_to(ROOT).with_suffix('').parts))}`" not in page
    ]
    assert missing == [], "docs/architecture.md: add these modules"
