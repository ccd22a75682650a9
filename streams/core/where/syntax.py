"""The parsed form of a ``where`` expression: small frozen nodes, each with its position.

Nodes compare equal by what they say, not where they were written, so the same
filled-in expression from two routes is one filter (:mod:`streams.core.where.compiler`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# What a value path starts from; ``value`` is the decoded record value.
ROOTS = ("value", "key", "headers", "timestamp")
COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")

Scalar = str | int | float | bool


class WhereError(ValueError):
    """An expression that does not parse, or is over a limit; ``position`` is 1-based (0: the whole text)."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at position {position})" if position else message)
        self.message = message
        self.position = position


@dataclass(frozen=True, slots=True)
class Path:
    """``value.a.b[0]``, ``key``, ``headers.NAME`` or ``timestamp``."""

    root: str
    parts: tuple[str | int, ...] = ()
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        out = self.root
        for part in self.parts:
            if isinstance(part, int):
                out += f"[{part}]"
            else:
                out += f".{part}" if part.isidentifier() else f"[{_quote(part)}]"
        return out


@dataclass(frozen=True, slots=True)
class Literal:
    """A number, string or boolean; ``loose``: a bare placeholder's text, a number where compared with one."""

    value: Scalar
    loose: bool = False
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        if isinstance(self.value, bool):
            return "true" if self.value else "false"
        if isinstance(self.value, str):
            return f"~{_quote(self.value)}" if self.loose else _quote(self.value)
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Placeholder:
    """``${params.NAME}``, ``${query.NAME}``, ``${claims.NAME}`` or ``${identity}``, or a string holding them."""

    source: str  # the template, without quotes for a bare one
    quoted: bool
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return _quote(self.source) if self.quoted else self.source


Operand = Path | Literal | Placeholder


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Operand
    right: Operand
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return f"{self.left.text()} {self.op} {self.right.text()}"


@dataclass(frozen=True, slots=True)
class In:
    """``operand in [a, b]``, or ``operand in value.list`` (any element equal)."""

    item: Operand
    choices: tuple[Operand, ...] | Path
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        if isinstance(self.choices, Path):
            return f"{self.item.text()} in {self.choices.text()}"
        return f"{self.item.text()} in [{', '.join(c.text() for c in self.choices)}]"


@dataclass(frozen=True, slots=True)
class Exists:
    path: Path
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return f"exists({self.path.text()})"


@dataclass(frozen=True, slots=True)
class StartsWith:
    item: Operand
    prefix: Operand
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return f"startswith({self.item.text()}, {self.prefix.text()})"


@dataclass(frozen=True, slots=True)
class Truth:
    """A bare operand used as a condition: true when it is the boolean ``true``."""

    item: Operand
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return self.item.text()


@dataclass(frozen=True, slots=True)
class Not:
    item: Node
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return f"not ({self.item.text()})"


@dataclass(frozen=True, slots=True)
class AllOf:
    items: tuple[Node, ...]
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return " and ".join(f"({item.text()})" for item in self.items)


@dataclass(frozen=True, slots=True)
class AnyOf:
    items: tuple[Node, ...]
    pos: int = field(default=0, compare=False)

    def text(self) -> str:
        return " or ".join(f"({item.text()})" for item in self.items)


Node = Compare | In | Exists | StartsWith | Truth | Not | AllOf | AnyOf


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
