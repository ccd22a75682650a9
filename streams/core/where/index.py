"""What lets many filters be skipped at once: an equality every record passing the filter must satisfy.

``value.team == ${params.team} and value.goals > 2`` can only hold for a record
whose ``value.team`` is the filled-in team, so the hub files the filter under that
field and value and, per record, reads the field once and asks only the filters
filed under the value it has, as it finds key-filtered streams by the record's
key. A filter without such a term is asked for every record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from typing import Any

from streams.core.where.syntax import AllOf, Compare, Literal, Node, Path


def index_terms(node: Node) -> tuple[Path, tuple[Hashable, ...]] | None:
    """A field and the index keys one of which it must have for ``node`` to hold (None: no such term)."""
    items = node.items if isinstance(node, AllOf) else (node,)
    for item in items:
        if isinstance(item, AllOf):
            found = index_terms(item)
            if found is not None:
                return found
        if not isinstance(item, Compare) or item.op != "==":
            continue
        path, literal = item.left, item.right
        if isinstance(path, Literal):
            path, literal = literal, path
        if isinstance(path, Path) and isinstance(literal, Literal):
            return path, literal_keys(literal)
    return None


def literal_keys(literal: Literal) -> tuple[Hashable, ...]:
    """The index keys a field equal to ``literal`` has (a placeholder's text may also be a number)."""
    value = literal.value
    if literal.loose:
        keys: list[Hashable] = [("s", value)]
        with contextlib.suppress(ValueError):
            keys.append(("n", float(value)))
        return tuple(keys)
    key = index_key(value)
    return (key,) if key is not None else ()


def index_key(value: Any) -> Hashable | None:
    """A field's value as an index key: strings, numbers (1 and 1.0 alike) and booleans apart."""
    kind = type(value)
    if kind is str:
        return ("s", value)
    if kind is int or kind is float:
        return ("n", value)  # hash(1) == hash(1.0), and they are equal: one key
    if kind is bool:
        return ("b", value)
    return None
