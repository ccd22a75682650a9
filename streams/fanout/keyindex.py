"""A partition cache's records by key, so a stream of some keys reads only theirs.

A key filter compares a record's ``match_key``; a record that did not decode
(``problem`` set) is counted by every stream, so it has a run of its own and sits
in no key's run. A keyless record can pass no key filter and is not indexed.

The index follows the cache: a record enters when the cache appends it and
leaves when the cache evicts it, which is always its run's oldest. A key with
one cached record holds that record itself, not a run (a topic whose keys are
all distinct pays a dictionary entry per record, nothing more).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Iterable
from operator import attrgetter

from streams.core.records import Record

_offset = attrgetter("offset")


class KeyRun:
    """The cached records of one key (or the undecodable ones) of a partition, oldest first from ``head``."""

    __slots__ = ("head", "records")

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.head = 0

    def __len__(self) -> int:
        return len(self.records) - self.head

    def append(self, record: Record) -> None:
        self.records.append(record)

    def drop_oldest(self) -> None:
        records = self.records
        records[self.head] = None  # type: ignore[call-overload]
        self.head += 1
        if self.head > 64 and self.head * 2 > len(records):
            del records[: self.head]
            self.head = 0

    def oldest(self) -> Record:
        return self.records[self.head]

    def records_from(self, offset: int, limit: int) -> list[Record]:
        records = self.records
        index = bisect.bisect_left(records, offset, lo=self.head, key=_offset)
        return records[index : index + limit]


class KeyIndex:
    """The runs of one partition's cache: by match key, and the undecodable records'."""

    __slots__ = ("_by_key", "_problems")

    def __init__(self) -> None:
        self._by_key: dict[bytes, Record | KeyRun] = {}
        self._problems = KeyRun([])

    def add(self, record: Record) -> None:
        if record.problem is not None:
            self._problems.append(record)
            return
        key = record.match_key
        if key is None:
            return
        held = self._by_key.get(key)
        if held is None:
            self._by_key[key] = record
        elif isinstance(held, KeyRun):
            held.append(record)
        else:
            self._by_key[key] = KeyRun([held, record])

    def remove(self, record: Record) -> None:
        """Take out ``record``, the oldest the cache holds (so the oldest of its run)."""
        if record.problem is not None:
            self._problems.drop_oldest()
            return
        key = record.match_key
        if key is None:
            return
        held = self._by_key[key]
        if isinstance(held, KeyRun):
            held.drop_oldest()
            if len(held) == 1:
                self._by_key[key] = held.oldest()
        else:
            del self._by_key[key]

    def picks(self, keys: Iterable[bytes], offset: int, limit: int) -> list[Record]:
        """Up to ``limit`` records at or after ``offset``, in offset order: those of ``keys`` and the undecodable."""
        runs: list[list[Record]] = []
        by_key = self._by_key
        for key in keys:
            held = by_key.get(key)
            if held is None:
                continue
            if isinstance(held, KeyRun):
                records = held.records_from(offset, limit)
                if records:
                    runs.append(records)
            elif held.offset >= offset:
                runs.append([held])
        if self._problems:
            problems = self._problems.records_from(offset, limit)
            if problems:
                runs.append(problems)
        if len(runs) <= 1:
            return runs[0] if runs else []
        return list(itertools.islice(heapq.merge(*runs, key=_offset), limit))

    def __len__(self) -> int:
        """How many records the index holds."""
        return len(self._problems) + sum(len(h) if isinstance(h, KeyRun) else 1 for h in self._by_key.values())

    def runs(self) -> dict[bytes | None, list[Record]]:
        """Every run as a list, the undecodable records' under ``None`` (for checks)."""
        runs: dict[bytes | None, list[Record]] = {
            key: held.records[held.head :] if isinstance(held, KeyRun) else [held] for key, held in self._by_key.items()
        }
        if self._problems:
            runs[None] = self._problems.records[self._problems.head :]
        return runs
