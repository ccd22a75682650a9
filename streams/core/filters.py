"""Message filters (SPEC 2.1): a message passes if it matches ANY filter.

A filter matches when its key (if given) equals the message key and every
header it names has that value on the message. No filters: everything passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
    """The filters of one stream; empty means every message passes."""

    filters: tuple[MessageFilter, ...] = ()

    def matches(self, key: bytes | None, headers: Headers | None) -> bool:
        if not self.filters:
            return True
        return any(f.matches(key, headers) for f in self.filters)

    @property
    def accepts_all(self) -> bool:
        return not self.filters

    @property
    def keys(self) -> frozenset[bytes] | None:
        """The only keys a message can have to pass, when every filter names one; else None.

        The hub indexes such streams by key, so a record is matched only against the
        streams that can want it.
        """
        if not self.filters or any(f.key is None for f in self.filters):
            return None
        return frozenset(f.key for f in self.filters if f.key is not None)
