"""The house rules a test can check: imports point one way (ewif ← simulate ← realrun; ewif
and simulate never import torch), ewif's sub-packages import only those below them
(docs/architecture.md), no module takes part in an import circle (deferred imports
included), and no module is shadowed by a function or other object of the same dotted name
(``import ewif.x`` and ``ewif.x`` must be the same module)."""

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


#: ewif's sub-packages and the sub-packages each may import (besides itself); the modules
#: directly in ``ewif/`` (``__init__``, ``cli``) are the top of the house.
EWIF_LAYERS = {
    "base": set(),
    "theory": {"base"},
    "kernel": {"base", "theory"},
    "files": {"base", "theory", "kernel"},
    "search": {"base", "theory", "kernel", "files"},
    "predict": {"base", "theory", "kernel", "files"},
    "serving": {"base", "theory", "kernel", "files", "search", "predict"},
    "plotting": {"base", "theory", "kernel", "files", "search", "predict"},
    "commands": {"base", "theory", "kernel", "files", "search", "predict", "serving", "plotting"},
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


def module_name(path: Path) -> str:
    """The dotted name of a project file (a package by its ``__init__``)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The project modules a file imports anywhere in it (deferred and ``TYPE_CHECKING``
    imports included): for ``from a.b import c`` the module ``a.b.c`` if it is one, else
    ``a.b``; relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    files = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    known = {module_name(p) for p in files}
    return {module_name(p): imported_modules(p, known) for p in files}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_ewif_sub_packages_import_only_those_below_them():
    assert set(EWIF_LAYERS) == {
        p.name for p in (ROOT / "ewif").iterdir() if (p / "__init__.py").is_file()
    }, "a new ewif sub-package: give it a place in EWIF_LAYERS and docs/architecture.md"
    bad = []
    for module, imports in import_graph().items():
        parts = module.split(".")
        if parts[0] != "ewif" or len(parts) < 3:
            continue
        layer = parts[1]
        allowed = EWIF_LAYERS[layer] | {layer} | ({"cli"} if layer == "commands" else set())
        bad += [
            f"{module} -> {target}"
            for target in sorted(imports)
            if target.startswith("ewif.") and target.split(".")[1] not in allowed
        ]
    assert bad == []


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


def test_importing_the_kernel_loads_neither_the_files_nor_the_search():
    import subprocess
    import sys

    code = (
        "import sys, ewif.kernel.cascade\n"
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('ewif.')}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['base', 'kernel', 'theory']"


def test_the_public_names_of_ewif_still_import():
    import ewif

    assert {name: getattr(ewif, name).__name__ for name in ("Cascade", "optimize", "phi")} == {
        "Cascade": "Cascade",
        "optimize": "optimize",
        "phi": "phi",
    }
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        ewif.nope  # noqa: B018
