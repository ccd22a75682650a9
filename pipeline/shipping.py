"""The project code a Spark cluster's executors need, as one zip handed to ``SparkContext.addPyFile``.

A task's Python worker unpickles what the driver sent it (the Kafka data source class, the
producing function of the sink writes, the JSON Schema rules' pandas UDF) and imports their
modules. In local mode the workers are children of this process and find the project on the
``PYTHONPATH`` it sets; on a cluster (``spark://``, ``k8s://``, ``yarn``) they run on other
machines, from other directories. So the driver ships them exactly the modules those entry
points import, directly or not, found by reading the imports of the source (no Django among
them: the executor side never imports it). Imports under ``if TYPE_CHECKING:`` are left out.

The zip is deterministic (sorted entries, fixed times and modes): the same code gives the same
bytes and the same file name, so a new name means new code, and Spark never refuses the file
as one it already added with other content.
"""

from __future__ import annotations

import ast
import hashlib
import io
import os
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The modules whose classes and functions the driver pickles into tasks.
EXECUTOR_MODULES = ("pipeline.datasource", "pipeline.kafka_write", "pipeline.validation")

_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


def master_is_local(master: str) -> bool:
    """Whether ``master`` runs every task in this machine's processes (``local``, ``local[N]``, ``local[*]``)."""
    return master == "local" or master.startswith("local[")


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """The source file of the project module or package ``name``; ``None`` if it is not the project's."""
    base = root.joinpath(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _type_checking_only(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        pending.extend(child for child in ast.iter_child_nodes(node) if not _type_checking_only(child))


def imported_names(name: str, path: Path) -> set[str]:
    """Every module name the module ``name`` (at ``path``) imports, relative imports resolved.

    ``from package import thing`` gives both ``package`` and ``package.thing`` (which is a module or not).
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            anchor = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{anchor}.{base}" if base else anchor
        found.add(base)
        found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def modules_needed(entries: Iterable[str] = EXECUTOR_MODULES, root: Path = ROOT) -> dict[str, Path]:
    """The project modules ``entries`` import, directly or not, with their packages, by name."""
    needed: dict[str, Path] = {}
    pending = list(entries)
    while pending:
        name = pending.pop()
        if name in needed:
            continue
        path = module_file(name, root)
        if path is None:
            continue
        needed[name] = path
        parent = name.rpartition(".")[0]
        pending.extend([parent] if parent else [])
        pending.extend(imported_names(name, path))
    return needed


def code_zip(modules: dict[str, Path], root: Path = ROOT) -> bytes:
    """The zip of ``modules``' source files at their paths under ``root``, the same bytes for the same files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted({p.relative_to(root).as_posix() for p in modules.values()}):
            entry = zipfile.ZipInfo(path, date_time=_ZIP_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, (root / path).read_bytes())
    return buffer.getvalue()


def executor_code_zip(directory: Path | None = None) -> Path:
    """The zip of the executors' project code, written once into ``directory`` (a temporary one by default).

    Its name holds a digest of its bytes; an existing file of that name is the same code and is kept.
    """
    data = code_zip(modules_needed())
    folder = directory or Path(tempfile.gettempdir()) / "sluice-pyfiles"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"sluice-pipeline-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not path.exists():
        handle, partial = tempfile.mkstemp(dir=folder, suffix=".partial")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(partial, path)  # whole or absent, should two runs write it at once
    return path
