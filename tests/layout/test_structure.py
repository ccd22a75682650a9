"""The tree has no import cycle between modules, no outsized module, class or function, no ``global``.

Each rule is also shown to catch a tree that breaks it, so none of them can pass by reading nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.layout.structure import (
    CLASS_LINES_MAX,
    FUNCTION_LINES_MAX,
    MODULE_LINES_MAX,
    MODULE_LINES_WARN,
    ROOT,
    definition_sizes,
    global_statements,
    module_sizes,
    private_attributes,
    private_imports,
    structure_read,
)


@pytest.fixture(scope="module")
def structure():  # type: ignore[no-untyped-def]
    return structure_read()


def test_no_module_imports_itself_back(structure) -> None:  # type: ignore[no-untyped-def]
    assert len(structure.modules) > 100
    assert sum(len(targets) for targets in structure.imports.values()) > 300
    assert structure.cycles() == []


def test_modules_stay_small(structure) -> None:  # type: ignore[no-untyped-def]
    sizes = module_sizes(structure)
    assert [s for s in sizes if s.lines > MODULE_LINES_MAX] == []
    assert len([s for s in sizes if s.lines > MODULE_LINES_WARN]) <= 3


def test_classes_and_functions_stay_small(structure) -> None:  # type: ignore[no-untyped-def]
    assert [s for s in definition_sizes(structure, ast.ClassDef) if s.lines > CLASS_LINES_MAX] == []
    long_functions = [
        s for s in definition_sizes(structure, (ast.FunctionDef, ast.AsyncFunctionDef)) if s.lines > FUNCTION_LINES_MAX
    ]
    # One may be longer: the hot-path fan-out, whose comment says why it is one function.
    assert len(long_functions) <= 1, long_functions
    for size in long_functions:
        path, _, rest = size.where.partition(":")
        line = int(rest.split()[0])
        preceding = (ROOT / path).read_text(encoding="utf-8").splitlines()[max(0, line - 12) : line + 12]
        assert any("one function" in text for text in preceding), size


def test_no_global_statements(structure) -> None:  # type: ignore[no-untyped-def]
    assert global_statements(structure) == []


def test_bench_uses_public_names_only() -> None:
    assert private_imports(ROOT, "bench") == []
    assert private_attributes(ROOT, "bench") == []


def write(root: Path, files: dict[str, str]) -> Path:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("a_source", "b_source"),
    [
        ("from pkg import b\n", "from pkg.a import thing\n"),
        ("import pkg.b\n", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import Thing\n"),
        ("from . import b\n", "def late():\n    from .a import thing\n    return thing\n"),
    ],
    ids=["plain", "type-checking", "function-level"],
)
def test_a_cycle_is_found_however_it_is_written(tmp_path: Path, a_source: str, b_source: str) -> None:
    root = write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": a_source, "pkg/b.py": b_source, "pkg/c.py": ""})
    assert structure_read(root, ("pkg",)).cycles() == [["pkg.a", "pkg.b"]]


def test_a_one_way_import_is_no_cycle(tmp_path: Path) -> None:
    root = write(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "from pkg.b import x\n", "pkg/b.py": "x = 1\n"})
    structure = structure_read(root, ("pkg",))
    assert structure.imports["pkg.a"] == {"pkg.b"}
    assert structure.cycles() == []


def test_globals_and_private_names_are_found(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/state.py": "_cache = None\ndef get():\n    global _cache\n    return _cache\n",
            "tools/use.py": "from pkg.state import _cache, get\nfrom pkg import state\nstate.get()._hidden = 1\n",
        },
    )
    assert global_statements(structure_read(root, ("pkg",))) == ["pkg/state.py:3 global _cache"]
    assert private_imports(root, "tools", ("pkg",)) == ["tools/use.py:1 pkg.state._cache"]
    assert private_attributes(root, "tools") == ["tools/use.py:3 ._hidden"]
