"""A hub's live streams with a ``where`` filter, by filter, and the filters by the field value they need.

Streams with the same filled-in filter share one entry, so a record is tested
once per distinct filter. A filter that can hold only when a field has a given
value (:mod:`streams.core.where.index`) is filed under that field and value:
per record the field is read once and only the filters filed under its value
are tested, so a thousand per-team filters cost a lookup, not a thousand tests.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from streams.core.records import Record
from streams.core.where import Subject, Where
from streams.core.where.compiler import path_getter
from streams.core.where.index import index_key
from streams.core.where.syntax import Path
from streams.fanout.subscriber import Subscriber

Streams = dict[Subscriber, None]


class WhereSet:
    __slots__ = ("by_where", "getters", "indexed", "unindexed")

    def __init__(self) -> None:
        self.by_where: dict[Where, Streams] = {}
        # Filters tested for every record, and filters by field and value (the same stream dicts).
        self.unindexed: dict[Where, Streams] = {}
        self.indexed: dict[Path, dict[Hashable, dict[Where, Streams]]] = {}
        self.getters: dict[Path, Callable[[Subject], Any]] = {}

    def add(self, where: Where, sub: Subscriber) -> None:
        streams = self.by_where.get(where)
        if streams is None:
            streams = self.by_where[where] = {}
            self._file(where, streams)
        streams[sub] = None

    def remove(self, where: Where, sub: Subscriber) -> None:
        streams = self.by_where.get(where)
        if streams is None:
            return
        streams.pop(sub, None)
        if not streams:
            del self.by_where[where]
            self._unfile(where)

    def passed(self, record: Record) -> list[Streams]:
        """The streams of each filter ``record`` passes (each distinct filter tested at most once)."""
        subject = Subject(record)
        out = [streams for where, streams in self.unindexed.items() if where.test(subject)]
        for path, table in self.indexed.items():
            key = index_key(self.getters[path](subject))
            wheres = table.get(key) if key is not None else None
            if wheres:
                out += [streams for where, streams in wheres.items() if where.test(subject)]
        return out

    def _file(self, where: Where, streams: Streams) -> None:
        if where.index is None:
            self.unindexed[where] = streams
            return
        path, keys = where.index
        if path not in self.getters:
            self.getters[path] = path_getter(path)
        table = self.indexed.setdefault(path, {})
        for key in keys:
            table.setdefault(key, {})[where] = streams

    def _unfile(self, where: Where) -> None:
        if where.index is None:
            self.unindexed.pop(where, None)
            return
        path, keys = where.index
        table = self.indexed.get(path, {})
        for key in keys:
            wheres = table.get(key)
            if wheres is not None:
                wheres.pop(where, None)
                if not wheres:
                    del table[key]
        if not table:
            self.indexed.pop(path, None)
            self.getters.pop(path, None)
