"""The members of a multiplexed stream, from its ``s`` parameters: ``alias:/path`` or ``/path``."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_MEMBERS = 16
# The stream's own event names: no member may be called so.
RESERVED_ALIASES = frozenset({"challenge", "ended"})
_ALIAS = re.compile(r"[A-Za-z0-9_-]{1,32}\Z")


class MemberError(ValueError):
    """An ``s`` parameter (or the set of them) that does not name members."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the request names it: its alias (its position when none is given) and its path."""

    alias: str
    path: str


def members_parse(values: list[str]) -> list[MemberSpec]:
    """The members named by the ``s`` values, in order; :class:`MemberError` names what is wrong."""
    if not values:
        raise MemberError("name the routes to follow with s=/path or s=alias:/path (1 to 16 of them)")
    if len(values) > MAX_MEMBERS:
        raise MemberError(f"a multiplexed stream has at most {MAX_MEMBERS} members, not {len(values)}")
    members: list[MemberSpec] = []
    seen: set[str] = set()
    for index, value in enumerate(values):
        member = member_parse(index, value)
        if member.alias in seen:
            raise MemberError(f"the alias {member.alias!r} is given twice")
        seen.add(member.alias)
        members.append(member)
    return members


def member_parse(index: int, value: str) -> MemberSpec:
    if value.startswith("/"):
        return MemberSpec(str(index), value)
    alias, sep, path = value.partition(":")
    if not sep or not path.startswith("/"):
        raise MemberError(f"s={value!r} is neither /path nor alias:/path")
    if not _ALIAS.match(alias):
        raise MemberError(f"the alias {alias!r} is not 1 to 32 of A-Z a-z 0-9 _ -")
    if alias in RESERVED_ALIASES:
        raise MemberError(f"the alias {alias!r} is the name of one of the stream's own events")
    return MemberSpec(alias, path)
