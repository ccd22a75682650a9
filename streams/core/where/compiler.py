"""Compiling a filled-in ``where`` tree to a tree of closures, once per distinct expression.

Each node becomes a function of a :class:`Subject` (one record, its value parsed
on first use), with constants folded in where the closure is made: a comparison
with a literal reads one field and compares once. A field that is missing (or
JSON ``null``) makes every comparison with it false, ``!=`` included; ``not``
inverts that, so ``not (value.x == 1)`` holds for a record without ``x``.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from streams.core.records import Record
from streams.core.where.index import index_terms
from streams.core.where.syntax import (
    AllOf,
    AnyOf,
    Compare,
    Exists,
    In,
    Literal,
    Node,
    Not,
    Operand,
    Path,
    Placeholder,
    StartsWith,
    Truth,
)

MISSING: Any = object()
_UNPARSED: Any = object()


class Subject:
    """One record as filters read it: its value parsed as JSON once, when a filter first needs it."""

    __slots__ = ("document", "record")

    def __init__(self, record: Record) -> None:
        self.record = record
        self.document: Any = _UNPARSED

    def value(self) -> Any:
        document = self.document
        if document is _UNPARSED:
            raw = self.record.value
            try:
                document = json.loads(raw) if raw is not None else MISSING
            except ValueError:  # not JSON (a plain topic's text): a string, else nothing to read
                try:
                    document = raw.decode("utf-8") if raw is not None else MISSING
                except UnicodeDecodeError:
                    document = MISSING
            self.document = document
        return document


Test = Callable[[Subject], bool]
Getter = Callable[[Subject], Any]


@dataclass(frozen=True, slots=True)
class Where:
    """A compiled filter: ``test(Subject(record))``. Equal (and hashed) by what it says."""

    node: Node
    test: Test = field(compare=False, repr=False)
    # A field the record must have one of these index keys in for the filter to hold (see .index).
    index: tuple[Path, tuple[Hashable, ...]] | None = field(default=None, compare=False, repr=False)

    @property
    def text(self) -> str:
        return self.node.text()

    def admits(self, record: Record) -> bool:
        return self.test(Subject(record))


@lru_cache(maxsize=4096)
def where_compile(node: Node) -> Where:
    """The compiled filter of a filled-in tree; the same tree gives the same :class:`Where`."""
    return Where(node, _test(node), index_terms(node))


def path_getter(path: Path) -> Getter:
    """Reads ``path`` from a :class:`Subject` (``MISSING`` when it is not there)."""
    return _getter(path)


def _test(node: Node) -> Test:
    if isinstance(node, AllOf):
        tests = tuple(_test(item) for item in node.items)
        return lambda s: all(t(s) for t in tests)
    if isinstance(node, AnyOf):
        tests = tuple(_test(item) for item in node.items)
        return lambda s: any(t(s) for t in tests)
    if isinstance(node, Not):
        inner = _test(node.item)
        return lambda s: not inner(s)
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, Exists):
        get = _getter(node.path)
        return lambda s: get(s) is not MISSING
    if isinstance(node, StartsWith):
        return _startswith(node)
    if isinstance(node, Truth):
        get = _getter(node.item)
        return lambda s: get(s) is True
    raise TypeError(f"not a where node: {node!r}")


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_FLIPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _kind(value: Any) -> type | None:
    """What a value compares as: numbers with numbers, strings with strings, booleans with booleans."""
    kind = type(value)
    if kind is bool or kind is str:
        return kind
    if kind is int or kind is float:
        return float
    return None


def _loose_number(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _compare(node: Compare) -> Test:
    op, left, right = node.op, node.left, node.right
    if isinstance(left, Literal) and not isinstance(right, Literal):
        op, left, right = _FLIPPED[op], right, left
    compare = _OPS[op]
    get = _getter(left)
    if isinstance(right, Literal):
        constant = right.value
        kind = _kind(constant)
        if right.loose:
            text, number = constant, _loose_number(str(constant))

            def loose(s: Subject) -> bool:
                value = get(s)
                kind = type(value)
                if kind is str:
                    return compare(value, text)
                if (kind is int or kind is float) and number is not None:
                    return compare(value, number)
                return False

            return loose
        if kind is float:

            def numeric(s: Subject) -> bool:
                value = get(s)
                kind = type(value)
                return (kind is int or kind is float) and compare(value, constant)

            return numeric
        if op in ("==", "!=") or kind is str:

            def same_kind(s: Subject) -> bool:
                value = get(s)
                return type(value) is kind and compare(value, constant)

            return same_kind
        return lambda s: False  # booleans are not ordered
    get_right = _getter(right)

    def fields(s: Subject) -> bool:
        a, b = get(s), get_right(s)
        kind = _kind(a)
        return kind is not None and kind is _kind(b) and (kind is not bool or op in ("==", "!=")) and compare(a, b)

    return fields


def _in(node: In) -> Test:
    get = _getter(node.item)
    if isinstance(node.choices, Path):
        get_list = _getter(node.choices)

        def element(s: Subject) -> bool:
            value, items = get(s), get_list(s)
            kind = _kind(value)
            return kind is not None and type(items) is list and any(_kind(i) is kind and i == value for i in items)

        return element
    texts = frozenset(c.value for c in node.choices if isinstance(c, Literal) and type(c.value) is str)
    numbers = frozenset(
        n
        for c in node.choices
        if isinstance(c, Literal)
        for n in [_loose_number(str(c.value)) if c.loose else c.value]
        if type(n) in (int, float)
    )
    booleans = frozenset(c.value for c in node.choices if isinstance(c, Literal) and type(c.value) is bool)

    def member(s: Subject) -> bool:
        value = get(s)
        kind = type(value)
        if kind is str:
            return value in texts
        if kind is int or kind is float:
            return value in numbers
        return kind is bool and value in booleans

    return member


def _startswith(node: StartsWith) -> Test:
    get = _getter(node.item)
    if isinstance(node.prefix, Literal):
        prefix = node.prefix.value
        if type(prefix) is not str:
            return lambda s: False
        return lambda s: type(value := get(s)) is str and value.startswith(prefix)
    get_prefix = _getter(node.prefix)
    return lambda s: type(value := get(s)) is str and type(p := get_prefix(s)) is str and value.startswith(p)


def _getter(operand: Operand) -> Getter:
    if isinstance(operand, Literal):
        constant = operand.value
        return lambda s: constant
    if isinstance(operand, Placeholder):
        raise TypeError("a where tree is compiled once its placeholders are filled")
    if operand.root == "timestamp":
        return lambda s: s.record.timestamp
    if operand.root == "key":
        return _key
    if operand.root == "headers":
        return _header(str(operand.parts[0]))
    parts = operand.parts
    if not parts:
        return lambda s: _present(s.value())
    if len(parts) == 1:
        only = parts[0]

        def one(s: Subject) -> Any:
            document = s.value()
            if type(document) is dict:
                return _present(document.get(only, MISSING))
            return _step(document, only)

        return one

    def walk(s: Subject) -> Any:
        document = s.value()
        for part in parts:
            document = _step(document, part)
            if document is MISSING:
                return MISSING
        return _present(document)

    return walk


def _step(document: Any, part: str | int) -> Any:
    if type(document) is dict and type(part) is str:
        return document.get(part, MISSING)
    if type(document) is list and type(part) is int and part < len(document):
        return document[part]
    return MISSING


def _present(value: Any) -> Any:
    return MISSING if value is None else value


def _key(s: Subject) -> Any:
    key = s.record.match_key
    if key is None:
        return MISSING
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return MISSING


def _header(name: str) -> Getter:
    def header(s: Subject) -> Any:
        for header_name, value in s.record.headers or ():
            if header_name == name and value is not None:
                try:
                    return value.decode("utf-8")
                except UnicodeDecodeError:
                    return MISSING
        return MISSING

    return header
