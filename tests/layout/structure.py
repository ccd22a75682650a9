"""The tree's structure read from its syntax: import cycles between modules, and sizes.

import-linter checks the layers, but it skips imports under ``TYPE_CHECKING`` and
inside functions, and a pair of modules that import each other that way is still
one concept in two files. This reads every import of the production packages,
wherever it stands, and finds the strongly connected modules (Tarjan). It also
measures what a reader has to hold in the head: modules, classes and functions by
lines, and ``global`` statements.

Run it on its own to print the findings: ``python -m tests.layout.structure``.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("project", "demo", "pipeline", "streams", "guards", "common")
MODULE_LINES_MAX = 450
MODULE_LINES_WARN = 400
CLASS_LINES_MAX = 250
FUNCTION_LINES_MAX = 80


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool

    def tree(self) -> ast.Module:
        return ast.parse(self.path.read_text(encoding="utf-8"), str(self.path))


@dataclass
class Structure:
    """What the tree holds: its modules and the import edges between them."""

    root: Path
    modules: dict[str, Module]
    imports: dict[str, set[str]] = field(default_factory=dict)

    def where(self, module: Module) -> str:
        return str(module.path.relative_to(self.root))

    def cycles(self) -> list[list[str]]:
        """Every set of two or more modules that reach each other through imports, each sorted."""
        return [sorted(component) for component in strongly_connected(self.imports) if len(component) > 1]


def production_modules(root: Path, packages: tuple[str, ...] = PACKAGES) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            if "migrations" in relative.parts:
                continue
            parts = list(relative.with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            modules[".".join(parts)] = Module(".".join(parts), path, is_package)
    return modules


def imported_names(module: Module, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The dotted names an import statement may load: the module, and each name as a submodule."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, base] if base else package)
    yield base
    for alias in node.names:
        yield f"{base}.{alias.name}"


def known_module(name: str, modules: dict[str, Module]) -> str | None:
    """The longest prefix of ``name`` that is a module of the tree (``a.b.func`` -> ``a.b``)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def structure_read(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> Structure:
    """Every import of every module, at any depth (``TYPE_CHECKING`` blocks and function bodies included)."""
    modules = production_modules(root, packages)
    structure = Structure(root, modules, {name: set() for name in modules})
    for module in modules.values():
        for node in ast.walk(module.tree()):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in imported_names(module, node):
                    target = known_module(name, modules)
                    if target is not None and target != module.name:
                        structure.imports[module.name].add(target)
    return structure


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit on deep import chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components


@dataclass(frozen=True)
class Size:
    where: str
    lines: int


def module_sizes(structure: Structure) -> list[Size]:
    sizes = [
        Size(structure.where(m), len(m.path.read_text(encoding="utf-8").splitlines()))
        for m in structure.modules.values()
    ]
    return sorted(sizes, key=lambda size: -size.lines)


def definition_sizes(structure: Structure, kind: type[ast.AST] | tuple[type[ast.AST], ...]) -> list[Size]:
    sizes = []
    for module in structure.modules.values():
        for node in ast.walk(module.tree()):
            if isinstance(node, kind):
                assert isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                sizes.append(Size(f"{structure.where(module)}:{node.lineno} {node.name}", lines))
    return sorted(sizes, key=lambda size: -size.lines)


def global_statements(structure: Structure) -> list[str]:
    return [
        f"{structure.where(module)}:{node.lineno} global {', '.join(node.names)}"
        for module in structure.modules.values()
        for node in ast.walk(module.tree())
        if isinstance(node, ast.Global)
    ]


def source_files(root: Path, folder: str) -> list[Path]:
    """``folder``'s own Python files: not those of a hidden folder in it (a virtualenv a benchmark made)."""
    return [
        path
        for path in sorted((root / folder).rglob("*.py"))
        if not any(part.startswith(".") for part in path.relative_to(root / folder).parts)
    ]


def private_imports(root: Path, folder: str, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Names beginning with an underscore that ``folder``'s modules import from the production packages."""
    found = []
    for path in source_files(root, folder):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module.split(".")[0] not in packages:
                continue
            private = [a.name for a in node.names if a.name.startswith("_")]
            private += [part for part in node.module.split(".") if part.startswith("_") and part != "__init__"]
            found += [f"{path.relative_to(root)}:{node.lineno} {node.module}.{name}" for name in private]
    return found


def private_attributes(root: Path, folder: str) -> list[str]:
    """Attributes beginning with one underscore that ``folder``'s modules read or write on objects not their own.

    ``self._x`` and ``cls._x`` are a module's own; anything else with a leading underscore reaches into
    another module's object, but for upper-case names: libraries' constants spelt that way.
    """
    found = []
    for path in source_files(root, folder):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr.isupper():  # a library's constant, such as confluent-kafka's KafkaError._PARTITION_EOF
                continue
            found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
    return found


def report() -> str:
    structure = structure_read()
    functions = definition_sizes(structure, (ast.FunctionDef, ast.AsyncFunctionDef))
    lines = [f"{len(structure.modules)} modules, {sum(len(v) for v in structure.imports.values())} import edges"]
    lines.append(f"import cycles: {structure.cycles() or 'none'}")
    lines.append(f"modules over {MODULE_LINES_WARN} lines: {[s for s in module_sizes(structure) if s.lines > 400]}")
    classes = [s for s in definition_sizes(structure, ast.ClassDef) if s.lines > CLASS_LINES_MAX]
    lines.append(f"classes over {CLASS_LINES_MAX} lines: {classes}")
    lines.append(f"functions over {FUNCTION_LINES_MAX} lines: {[s for s in functions if s.lines > 80]}")
    lines.append(f"global statements: {global_statements(structure)}")
    lines.append(f"private names bench/ imports: {private_imports(ROOT, 'bench')}")
    lines.append(f"private attributes bench/ reaches: {private_attributes(ROOT, 'bench')}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(report() + "\n")
