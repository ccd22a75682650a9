"""A configuration document as plain data plus where each value was written (file, line, column).

YAML is loaded node by node so every mapping, sequence and scalar keeps its
position; an error found much later (a model's ``full_clean``) can then name
the line of the key it is about. Translated documents (Zilla, AsyncAPI) keep
pointing at the lines of the file they came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DocPath = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Mark:
    """A 1-based line and column."""

    line: int
    column: int


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with a configuration file, located as precisely as known."""

    filename: str
    message: str
    mark: Mark | None = None
    where: str = ""

    def __str__(self) -> str:
        place = self.filename
        if self.mark is not None:
            place += f":{self.mark.line}:{self.mark.column}"
        return f"{place}: {self.where}: {self.message}" if self.where else f"{place}: {self.message}"


class ConfigError(Exception):
    """A configuration that cannot be applied; ``problems`` says every reason found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        super().__init__("\n".join(str(problem) for problem in problems))
        self.problems = problems


def path_text(path: DocPath) -> str:
    """``("routes", 0, "cors", "allow_origins")`` -> ``routes[0].cors.allow_origins``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass
class Document:
    """Parsed data, and the position of each value (``marks``) and of each mapping key (``key_marks``)."""

    data: Any
    filename: str
    marks: dict[DocPath, Mark] = field(default_factory=dict)
    key_marks: dict[DocPath, Mark] = field(default_factory=dict)
    # For a translated document: the path in the source file each value came from.
    origins: dict[DocPath, DocPath] = field(default_factory=dict)

    def mark(self, path: DocPath) -> Mark | None:
        """Where ``path`` was written: its key, else its value, else the nearest enclosing one."""
        while True:
            found = self.key_marks.get(path) or self.marks.get(path)
            if found is not None or not path:
                return found
            path = path[:-1]

    def problem(self, path: DocPath, message: str) -> ConfigProblem:
        return ConfigProblem(self.filename, message, self.mark(path), path_text(self.source_path(path)))

    def source_path(self, path: DocPath) -> DocPath:
        """``path`` as written in the file: through ``origins`` for a translated document."""
        for cut in range(len(path), -1, -1):
            origin = self.origins.get(path[:cut])
            if origin is not None:
                return (*origin, *path[cut:])
        return path


def _mark(yaml_mark: yaml.Mark) -> Mark:
    return Mark(yaml_mark.line + 1, yaml_mark.column + 1)


def document_load(text: str, filename: str) -> Document:
    """Parse YAML ``text`` (safe types only), recording positions; :class:`ConfigError` if it does not parse."""
    try:
        # The reader checks characters as it is built: a control character fails here already.
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem(filename, f"not valid YAML: {exc}")]) from exc
    problems: list[ConfigProblem] = []
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        document = Document(data, filename)
        if node is not None:
            _walk(loader, node, (), document, problems)
    except yaml.MarkedYAMLError as exc:
        mark = _mark(exc.problem_mark) if exc.problem_mark is not None else None
        message = " ".join(part for part in (exc.context, exc.problem) if part) or "not valid YAML"
        if exc.context_mark is not None and exc.context_mark.line != getattr(exc.problem_mark, "line", None):
            message += f" (the construct started at line {exc.context_mark.line + 1})"
        raise ConfigError([ConfigProblem(filename, f"not valid YAML: {message}", mark)]) from exc
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem(filename, f"not valid YAML: {exc}")]) from exc
    finally:
        loader.dispose()
    if problems:
        raise ConfigError(problems)
    return document


def document_read(path: str | Path) -> Document:
    """Load the file at ``path`` (see :func:`document_load`)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigProblem(str(path), f"cannot read: {exc}")]) from exc
    return document_load(text, str(path))


def _walk(
    loader: yaml.SafeLoader, node: yaml.Node, path: DocPath, document: Document, problems: list[ConfigProblem]
) -> None:
    document.marks[path] = _mark(node.start_mark)
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, Mark] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<": the merged keys keep the positions of the anchor
            key = loader.construct_object(key_node, deep=True)
            key_path = (*path, key if isinstance(key, str | int) else str(key))
            if key in first:
                problems.append(
                    ConfigProblem(
                        document.filename,
                        f"given twice (first at line {first[key].line})",
                        _mark(key_node.start_mark),
                        path_text(key_path),
                    )
                )
                continue
            first[key] = _mark(key_node.start_mark)
            document.key_marks[key_path] = first[key]
            _walk(loader, value_node, key_path, document, problems)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(loader, item, (*path, index), document, problems)


class Translation:
    """Builds a Sluice-format document from another format, each value remembering where it came from."""

    def __init__(self, source: Document) -> None:
        self.source = source
        self.document = Document({}, source.filename)
        self.skipped: list[tuple[str, str]] = []

    def origin(self, path: DocPath, source_path: DocPath) -> None:
        """Problems found at ``path`` of the translation are reported at ``source_path`` of the source."""
        self.document.origins[path] = source_path
        mark = self.source.mark(source_path)
        if mark is not None:
            self.document.key_marks[path] = mark

    def carry(self, path: DocPath, source_path: DocPath, value: Any) -> None:
        """:meth:`origin` for ``value`` copied as is, and for everything inside it."""
        self.origin(path, source_path)
        if isinstance(value, dict):
            for key, item in value.items():
                self.carry((*path, key), (*source_path, key), item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.carry((*path, index), (*source_path, index), item)

    def skip(self, source_path: DocPath, reason: str) -> None:
        """Something of the source that has no Sluice equivalent: reported, never silently dropped."""
        self.skipped.append((path_text(source_path), reason))
