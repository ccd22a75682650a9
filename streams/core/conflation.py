"""The latest record per key that a set of streams is owed: conflation by key (docs/filters.md, "Conflation").

A :class:`LatestTable` numbers every record put into it (its sequence) and keeps
only the newest one per key, in sequence order: putting a key again moves it to
the end. A stream remembers the sequence it was last written up to; what it is
owed is then the table's tail after that number, one entry per key that changed,
newest value each. Streams that were written at the same moment share that
number, so one tail (and one joined buffer) serves them all, and a record costs
the table one insertion whoever reads it.

Three kinds of entry are never replaced, so every stream is sent them:

- a tombstone (null value): a newer record of the key is added after it;
- a record without a key: nothing can supersede it;
- a record the table had to keep because a stream was still owed it (see above).

Entries every stream has been written past are dropped (:meth:`LatestTable.prune`);
the table's size is what the furthest-behind stream is owed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Entry:
    """One record as the table keeps it: its frame (with its own id), the id, and what it weighs."""

    key: bytes | None
    frame: bytes
    token: str  # the record's progress id: the id a stream resumes after once it was sent this entry
    tombstone: bool


@dataclass(frozen=True, slots=True)
class Owed:
    """The entries a stream is owed after one sequence number, as far as a byte budget allows."""

    frames: list[bytes]
    upto: int  # the sequence the stream is written up to once sent ``frames``
    token: str  # the id of the last frame ("" if none)
    superseded: int  # records after the stream's number, up to ``upto``, replaced by a newer one of their key


class LatestTable:
    """The newest record per key by sequence, with tombstones and keyless records kept (see the module)."""

    __slots__ = ("bytes", "entries", "latest", "seq")

    def __init__(self) -> None:
        self.seq = 0  # the sequence of the newest record put in
        self.entries: dict[int, Entry] = {}  # by sequence, in sequence order
        self.latest: dict[bytes, int] = {}  # key -> sequence of its entry, while it can be replaced
        self.bytes = 0  # frames held

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, key: bytes | None, frame: bytes, token: str, tombstone: bool) -> None:
        """Add a record; an older entry of ``key`` that is not a tombstone is dropped."""
        self.seq = seq = self.seq + 1
        entries = self.entries
        if key is not None:
            old = self.latest.get(key)
            if old is not None:
                entry = entries[old]
                if not entry.tombstone:
                    del entries[old]
                    self.bytes -= len(entry.frame)
            self.latest[key] = seq
        entries[seq] = Entry(key, frame, token, tombstone)
        self.bytes += len(frame)

    def owed(self, after: int, budget: int) -> Owed:
        """What a stream written up to ``after`` is owed, oldest first, cut at ``budget`` bytes (one entry at least)."""
        if after >= self.seq:
            return Owed([], after, "", 0)
        tail: list[tuple[int, Entry]] = []
        entries = self.entries
        for seq in reversed(entries):
            if seq <= after:
                break
            tail.append((seq, entries[seq]))
        tail.reverse()
        frames: list[bytes] = []
        size = 0
        upto, token = self.seq, ""
        for index, (_seq, entry) in enumerate(tail):
            size += len(entry.frame)
            if size > budget and frames:
                upto = tail[index - 1][0]  # the rest waits for the next write
                break
            frames.append(entry.frame)
            token = entry.token
        return Owed(frames, upto, token, (upto - after) - len(frames))

    def prune(self, upto: int) -> None:
        """Drop the entries at or before ``upto``: every stream has been written past them."""
        entries, latest = self.entries, self.latest
        done: list[int] = []
        for seq in entries:  # one pass: taking the first entry again and again rescans the removed ones
            if seq > upto:
                break
            done.append(seq)
        for seq in done:
            entry = entries.pop(seq)
            self.bytes -= len(entry.frame)
            if entry.key is not None and latest.get(entry.key) == seq:
                del latest[entry.key]
