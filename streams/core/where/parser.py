"""Parsing ``where`` expressions: text to :mod:`~streams.core.where.syntax` nodes, errors with positions.

The grammar, loosest binding first::

    expr       := conj (("or" | "||") conj)*
    conj       := unary (("and" | "&&") unary)*
    unary      := ("not" | "!") unary | "(" expr ")" | call | comparison
    call       := "exists" "(" path ")" | "startswith" "(" operand "," operand ")"
    comparison := operand [op operand | ["not"] "in" (list | path)]
    operand    := path | number | string | true | false | ${placeholder}

A recursive-descent parser over a regular-expression tokenizer: the language is
small enough that a generated parser would be more code than it saves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streams.core.where.syntax import (
    COMPARISONS,
    ROOTS,
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

# Deep enough for any hand-written filter, shallow enough that Python's stack is never near its end.
MAX_DEPTH = 32

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<number>-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<placeholder>\$\{[^}]*\})
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[<>()\[\],.!])
    )""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
_WORDS = {"and": "&&", "or": "||", "not": "!"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # number, string, placeholder, name, punct, end
    text: str
    pos: int  # 1-based


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    at = 0
    while True:
        while at < len(source) and source[at].isspace():
            at += 1
        if at == len(source):
            tokens.append(Token("end", "", at + 1))
            return tokens
        match = _TOKEN.match(source, at)
        if match is None or match.lastgroup is None:
            char = source[at]
            hint = "an unterminated string" if char in "\"'" else f"unexpected {char!r}"
            raise WhereError(hint, at + 1)
        kind = match.lastgroup
        tokens.append(Token(kind, match.group(kind), match.start(kind) + 1))
        at = match.end()


def unescape(token: Token) -> str:
    body = token.text[1:-1]
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\":
            escaped = body[index + 1]
            if escaped not in _ESCAPES:
                raise WhereError(f"unknown escape \\{escaped}", token.pos + index + 1)
            out.append(_ESCAPES[escaped])
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


class Parser:
    """One parse; ``placeholders``: whether ``${...}`` may appear (never in a client's filter)."""

    def __init__(self, source: str, *, placeholders: bool, max_depth: int = MAX_DEPTH) -> None:
        self.tokens = tokenize(source)
        self.index = 0
        self.placeholders = placeholders
        self.max_depth = max_depth
        self.depth = 0

    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def word(self) -> str:
        """The current token as an operator word (``and`` and ``&&`` alike), or its text."""
        token = self.token
        if token.kind == "name":
            return _WORDS.get(token.text, token.text)
        return token.text if token.kind == "punct" else ""

    def expect(self, text: str) -> Token:
        if self.token.kind in ("punct", "name") and self.token.text == text:
            return self.take()
        raise self.error(f"expected '{text}'")

    def error(self, message: str, token: Token | None = None) -> WhereError:
        token = token or self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        return WhereError(f"{message}, found {found}", token.pos)

    def parse(self) -> Node:
        node = self.disjunction()
        if self.token.kind != "end":
            raise self.error("expected 'and', 'or' or the end")
        return node

    def nested(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise WhereError(f"nested deeper than {self.max_depth}", self.token.pos)

    def disjunction(self) -> Node:
        pos = self.token.pos
        items = [self.conjunction()]
        while self.word() == "||":
            self.take()
            items.append(self.conjunction())
        return items[0] if len(items) == 1 else AnyOf(tuple(items), pos)

    def conjunction(self) -> Node:
        pos = self.token.pos
        items = [self.unary()]
        while self.word() == "&&":
            self.take()
            items.append(self.unary())
        return items[0] if len(items) == 1 else AllOf(tuple(items), pos)

    def unary(self) -> Node:
        token = self.token
        self.nested()
        try:
            if self.word() == "!":
                self.take()
                return Not(self.unary(), token.pos)
            if token.kind == "punct" and token.text == "(":
                self.take()
                node = self.disjunction()
                self.expect(")")
                return node
            if token.kind == "name" and token.text in ("exists", "startswith"):
                return self.call()
            return self.comparison()
        finally:
            self.depth -= 1

    def call(self) -> Node:
        name = self.take()
        self.expect("(")
        if name.text == "exists":
            node: Node = Exists(self.path(), name.pos)
        else:
            item = self.operand()
            self.expect(",")
            node = StartsWith(item, self.operand(), name.pos)
        self.expect(")")
        return node

    def comparison(self) -> Node:
        left = self.operand()
        op = self.token
        if op.kind == "punct" and op.text in COMPARISONS:
            self.take()
            return Compare(op.text, left, self.operand(), op.pos)
        negated = self.word() == "!" and self.tokens[self.index + 1].text == "in"
        if negated:
            self.take()
        if self.token.kind == "name" and self.token.text == "in":
            self.take()
            node: Node = In(left, self.choices(), op.pos)
            return Not(node, op.pos) if negated else node
        return Truth(left, left.pos)

    def choices(self) -> tuple[Operand, ...] | Path:
        if self.token.kind == "name":
            return self.path()
        self.expect("[")
        items: list[Operand] = []
        while not (self.token.kind == "punct" and self.token.text == "]"):
            items.append(self.operand())
            if self.token.text != ",":
                break
            self.take()
        self.expect("]")
        return tuple(items)

    def operand(self) -> Operand:
        token = self.token
        if token.kind == "number":
            self.take()
            number = float(token.text)
            return Literal(int(number) if number.is_integer() and abs(number) < 2**53 else number, pos=token.pos)
        if token.kind == "string":
            self.take()
            text = unescape(token)
            if "${" in text:
                self.placeholder_check(token)
                return Placeholder(text, quoted=True, pos=token.pos)
            return Literal(text, pos=token.pos)
        if token.kind == "placeholder":
            self.take()
            self.placeholder_check(token)
            return Placeholder(token.text, quoted=False, pos=token.pos)
        if token.kind == "name" and token.text in ("true", "false"):
            self.take()
            return Literal(token.text == "true", pos=token.pos)
        if token.kind == "name":
            return self.path()
        raise self.error("expected a field, a number, a string, true or false")

    def placeholder_check(self, token: Token) -> None:
        if not self.placeholders:
            raise WhereError("placeholders (${...}) are for a route's own filter", token.pos)

    def path(self) -> Path:
        token = self.token
        if token.kind != "name" or token.text not in ROOTS:
            raise self.error("expected value, key, headers or timestamp")
        self.take()
        parts: list[str | int] = []
        while self.token.kind == "punct" and self.token.text in (".", "["):
            if token.text in ("key", "timestamp") or (token.text == "headers" and parts):
                raise self.error(f"{token.text} has no fields" if token.text != "headers" else "a header has no fields")
            if self.take().text == ".":
                if self.token.kind != "name":
                    raise self.error("expected a field name")
                parts.append(self.take().text)
                continue
            part = self.take()
            if part.kind == "string":
                parts.append(unescape(part))
            elif part.kind == "number" and part.text.isdigit() and token.text == "value":
                parts.append(int(part.text))
            else:
                raise self.error("expected a quoted name or an index", part)
            self.expect("]")
        if token.text == "headers" and not parts:
            raise self.error("expected a header name (headers.NAME)")
        return Path(token.text, tuple(parts), token.pos)


def where_parse(source: str, *, placeholders: bool = True, max_depth: int = MAX_DEPTH) -> Node:
    """The expression's tree, or :class:`WhereError` with the position of what is wrong."""
    if not source.strip():
        raise WhereError("the expression is empty", 0)
    return Parser(source, placeholders=placeholders, max_depth=max_depth).parse()
