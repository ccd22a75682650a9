"""Filling a route's ``where`` placeholders for one request.

A placeholder is filled as a value, never as text: ``${params.team}`` becomes a
literal whatever the request put in it, so no parameter can change what the
expression says. A bare placeholder compares as a number with a number field
(``value.goals > ${query.min}``), a quoted one is always a string.
"""

from __future__ import annotations

from collections.abc import Iterator

from streams.core.templating import ExpansionContext, Template, TemplateError, template_compile
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
    WhereError,
)


def where_templates(node: Node) -> Iterator[tuple[Template, int]]:
    """Each placeholder's template and position (:class:`WhereError` for one that does not compile)."""
    for operand in _operands(node):
        if isinstance(operand, Placeholder):
            try:
                yield template_compile(operand.source, query=True), operand.pos
            except TemplateError as exc:
                raise WhereError(str(exc), operand.pos) from exc


def where_fill(node: Node, context: ExpansionContext) -> Node:
    """``node`` with every placeholder replaced by its value for this request (raises ``TemplateError``)."""
    if isinstance(node, AllOf | AnyOf):
        return type(node)(tuple(where_fill(item, context) for item in node.items), node.pos)
    if isinstance(node, Not):
        return Not(where_fill(node.item, context), node.pos)
    if isinstance(node, Compare):
        return Compare(node.op, _fill(node.left, context), _fill(node.right, context), node.pos)
    if isinstance(node, In):
        choices = node.choices if isinstance(node.choices, Path) else tuple(_fill(c, context) for c in node.choices)
        return In(_fill(node.item, context), choices, node.pos)
    if isinstance(node, StartsWith):
        return StartsWith(_fill(node.item, context), _fill(node.prefix, context), node.pos)
    if isinstance(node, Truth):
        return Truth(_fill(node.item, context), node.pos)
    return node


def _fill(operand: Operand, context: ExpansionContext) -> Operand:
    if not isinstance(operand, Placeholder):
        return operand
    text = template_compile(operand.source, query=True).expand(context)
    return Literal(text, loose=not operand.quoted, pos=operand.pos)


def _operands(node: Node) -> Iterator[Operand]:
    if isinstance(node, AllOf | AnyOf):
        for item in node.items:
            yield from _operands(item)
    elif isinstance(node, Not):
        yield from _operands(node.item)
    elif isinstance(node, Compare):
        yield node.left
        yield node.right
    elif isinstance(node, In):
        yield node.item
        yield from (node.choices,) if isinstance(node.choices, Path) else node.choices
    elif isinstance(node, StartsWith):
        yield node.item
        yield node.prefix
    elif isinstance(node, Truth):
        yield node.item
    elif isinstance(node, Exists):
        yield node.path
