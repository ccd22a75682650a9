"""``${params.NAME}``, ``${identity}`` and ``${attributes.NAME}`` templates (SPEC 2.1).

Topics, filter keys and filter header values are templates, expanded per
stream from the path parameters and the verified token. ``${claims.NAME}`` is
another name for ``${attributes.NAME}``: a claim reaches a template only when
the route's guard declares it as an attribute. A ``where`` filter's placeholders
may also name query parameters (``${query.NAME}``), which the filter declares
by using them (docs/filters.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_EXPR = re.compile(r"\$\{([^}]*)\}")
_REF = re.compile(r"(params|attributes|claims|query)\.([A-Za-z_][A-Za-z0-9_]*)\Z|identity\Z")


class TemplateError(ValueError):
    """A template that does not compile, or cannot be expanded for a request."""


@dataclass(frozen=True, slots=True)
class ExpansionContext:
    """What a template may refer to for one request."""

    params: Mapping[str, str]
    identity: str | None = None
    attributes: Mapping[str, str] | None = None
    query: Mapping[str, str] | None = None  # the first value of each query parameter


@dataclass(frozen=True, slots=True)
class Template:
    """A compiled template: literal text and references, alternating."""

    source: str
    # (literal, None) or ("", ("params"|"attributes"|"claims"|"query"|"identity", name))
    parts: tuple[tuple[str, tuple[str, str] | None], ...]

    @property
    def params(self) -> frozenset[str]:
        return frozenset(ref[1] for _, ref in self.parts if ref and ref[0] == "params")

    @property
    def queries(self) -> frozenset[str]:
        """The query parameters the template reads."""
        return frozenset(ref[1] for _, ref in self.parts if ref and ref[0] == "query")

    @property
    def params_only(self) -> bool:
        """True if the template needs no verified token (no ``${identity}``, no ``${attributes.NAME}``)."""
        return all(ref is None or ref[0] in ("params", "query") for _, ref in self.parts)

    @property
    def is_literal(self) -> bool:
        return all(ref is None for _, ref in self.parts)

    def expand(self, context: ExpansionContext) -> str:
        out: list[str] = []
        for literal, ref in self.parts:
            if ref is None:
                out.append(literal)
                continue
            space, name = ref
            if space == "params":
                value = context.params.get(name)
            elif space in ("attributes", "claims"):
                value = (context.attributes or {}).get(name)
            elif space == "query":
                value = (context.query or {}).get(name)
            else:
                value = context.identity
            if value is None:
                label = "${identity}" if space == "identity" else f"${{{space}.{name}}}"
                raise TemplateError(f"{label} has no value for this request")
            out.append(value)
        return "".join(out)


def template_compile(source: str, *, query: bool = False) -> Template:
    """Compile ``source`` or raise :class:`TemplateError` naming the bad expression.

    ``query``: whether ``${query.NAME}`` may appear (in a ``where`` filter only).
    """
    parts: list[tuple[str, tuple[str, str] | None]] = []
    pos = 0
    for expr in _EXPR.finditer(source):
        if expr.start() > pos:
            parts.append((source[pos : expr.start()], None))
        ref = _REF.match(expr.group(1).strip())
        if not ref or (ref.group(1) == "query" and not query):
            known = "${params.NAME}, ${identity}, ${attributes.NAME}, ${claims.NAME}"
            raise TemplateError(f"'{expr.group(0)}' is not one of {known}{', ${query.NAME}' if query else ''}")
        if ref.group(1):
            parts.append(("", (ref.group(1), ref.group(2))))
        else:
            parts.append(("", ("identity", "")))
        pos = expr.end()
    rest = source[pos:]
    if "${" in rest:
        raise TemplateError(f"unterminated '${{' in '{source}'")
    if rest:
        parts.append((rest, None))
    return Template(source, tuple(parts))
