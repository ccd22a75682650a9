"""Message filters (SPEC 2.1): a message passes if it matches ANY filter, and the ``where`` filter.

A filter matches when its key (if given) equals the message key and every
header it names has that value on the message. No filters: everything passes.
A ``where`` filter (docs/filters.md) reads what the record says; the hub
evaluates it once per record for all the streams that share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.core.records import Record
    from streams.core.where import Where

Headers = Sequence[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """One resolved filter (templates already expanded)."""

    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()

    def matches(self, key: bytes | None, headers: Headers | None) -> bool:
        if self.key is not None and key != self.key:
            return False
        for name, value in self.headers:
            if not headers or not any(h == name and v == value for h, v in headers):
                return False
        return True


@dataclass(frozen=True, slots=True)
class FilterSet:
    """The filters of one stream; empty (and no ``where``) means every message passes."""

    filters: tuple[MessageFilter, ...] = ()
    where: Where | None = None

    def matches(self, key: bytes | None, headers: Headers | None) -> bool:
        """Whether the key and header filters pass (the ``where`` filter is asked apart: see :meth:`admits`)."""
        if not self.filters:
            return True
        return any(f.matches(key, headers) for f in self.filters)

    def admits(self, record: Record) -> bool:
        """Whether ``record`` passes every filter of the stream, its ``where`` included."""
        if not self.matches(record.match_key, record.headers):
            return False
        return self.where is None or self.where.admits(record)

    @property
    def accepts_all(self) -> bool:
        return not self.filters and self.where is None

    @property
    def keys(self) -> frozenset[bytes] | None:
        """The only keys a message can have to pass, when every filter names one; else None.

        The hub indexes such streams by key, so a record is matched only against the
        streams that can want it.
        """
        if not self.filters or any(f.key is None for f in self.filters):
            return None
        return frozenset(f.key for f in self.filters if f.key is not None)
