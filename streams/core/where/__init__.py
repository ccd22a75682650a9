"""``where`` filters over what a record says: its value's fields, key, headers and timestamp (docs/filters.md).

A route's expression is parsed once (:class:`WhereTemplate`), filled in per
request from its placeholders, and compiled once per distinct filled-in
expression; a client's own expression (``?where=``, on routes that take one) is
parsed under tighter limits and ANDed with the route's, so it can only narrow.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.core.templating import ExpansionContext
from streams.core.where.compiler import Subject, Where, where_compile
from streams.core.where.filling import where_fill, where_templates
from streams.core.where.parser import MAX_DEPTH, where_parse
from streams.core.where.syntax import AllOf, Node, WhereError

__all__ = [
    "CLIENT_MAX_DEPTH",
    "CLIENT_MAX_LENGTH",
    "Subject",
    "Where",
    "WhereError",
    "WhereTemplate",
    "client_where_parse",
    "where_compile",
    "where_resolve",
    "where_template",
]

# What a client's ``?where=`` may be: enough for a page's choices, not a way to make every record cost more.
CLIENT_MAX_LENGTH = 512
CLIENT_MAX_DEPTH = 6
SERVER_MAX_LENGTH = 4096


@dataclass(frozen=True, slots=True)
class WhereTemplate:
    """A route's parsed ``where``, with what its placeholders read."""

    source: str
    node: Node
    params: frozenset[str]
    queries: frozenset[str]
    params_only: bool  # needs no verified token

    def fill(self, context: ExpansionContext) -> Node:
        """The tree for one request (``TemplateError`` when a placeholder has no value)."""
        return where_fill(self.node, context)


def where_template(source: str) -> WhereTemplate:
    """Parse a route's expression (:class:`WhereError` with the position of what is wrong)."""
    if len(source) > SERVER_MAX_LENGTH:
        raise WhereError(f"longer than {SERVER_MAX_LENGTH} characters", SERVER_MAX_LENGTH + 1)
    node = where_parse(source, placeholders=True, max_depth=MAX_DEPTH)
    templates = [template for template, _ in where_templates(node)]
    return WhereTemplate(
        source,
        node,
        params=frozenset().union(*(t.params for t in templates)),
        queries=frozenset().union(*(t.queries for t in templates)),
        params_only=all(t.params_only for t in templates),
    )


def client_where_parse(source: str) -> Node:
    """Parse a client's ``?where=`` under its limits: no placeholders, bounded length and depth."""
    if len(source) > CLIENT_MAX_LENGTH:
        raise WhereError(f"longer than {CLIENT_MAX_LENGTH} characters", CLIENT_MAX_LENGTH + 1)
    return where_parse(source, placeholders=False, max_depth=CLIENT_MAX_DEPTH)


def where_resolve(route: WhereTemplate | None, context: ExpansionContext, client: Node | None) -> Where | None:
    """The one compiled filter of a stream: the route's, filled in, and the client's, both required."""
    parts = [part for part in (route.fill(context) if route is not None else None, client) if part is not None]
    if not parts:
        return None
    return where_compile(parts[0] if len(parts) == 1 else AllOf(tuple(parts)))
