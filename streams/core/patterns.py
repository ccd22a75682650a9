"""Route path patterns: ``/events/{topic}`` and ``*`` (SPEC 2.1).

``{name}`` matches one or more characters except ``/``; ``*`` matches anything,
including nothing. Patterns match the path without its query string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"\{([^{}]*)\}|\*|[{}]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class PatternError(ValueError):
    """A path pattern that cannot be compiled; the message says why."""


@dataclass(frozen=True)
class PathPattern:
    """A compiled path pattern."""

    source: str
    params: tuple[str, ...]
    _regex: re.Pattern[str] = field(repr=False, compare=False)

    def match(self, path: str) -> dict[str, str] | None:
        """Path parameters if ``path`` matches, else ``None``."""
        found = self._regex.fullmatch(path)
        return found.groupdict() if found else None


def pattern_compile(source: str) -> PathPattern:
    """Compile ``source`` or raise :class:`PatternError` naming the problem."""
    if not source.startswith("/"):
        raise PatternError("a path pattern must start with '/'")
    if any(c.isspace() for c in source) or "?" in source or "#" in source:
        raise PatternError("a path pattern cannot hold spaces, '?' or '#'")
    parts: list[str] = []
    names: list[str] = []
    pos = 0
    for token in _TOKEN.finditer(source):
        parts.append(re.escape(source[pos : token.start()]))
        pos = token.end()
        text = token.group(0)
        if text == "*":
            parts.append(".*")
        elif text in ("{", "}"):
            raise PatternError(f"unbalanced '{text}' at position {token.start()}")
        else:
            name = token.group(1)
            if not _NAME.match(name):
                raise PatternError(f"'{{{name}}}' is not a valid parameter name")
            if name in names:
                raise PatternError(f"parameter '{name}' appears twice")
            names.append(name)
            parts.append(f"(?P<{name}>[^/]+)")
    parts.append(re.escape(source[pos:]))
    return PathPattern(source, tuple(names), re.compile("".join(parts)))
