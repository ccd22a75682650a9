"""A ``snapshot`` stream's start: the latest value per key of the retained log (SPEC 2.3).

Run by :class:`~streams.fanout.catchup.CatchUp` before it catches the stream up
from where the snapshot ended.
"""

from __future__ import annotations

from streams.core.ids import progress_encode
from streams.core.records import Record
from streams.core.sse import checkpoint_frame
from streams.fanout.catchup_reads import CHUNK_RECORDS, BacklogSession
from streams.fanout.state import HubControl, HubState
from streams.fanout.subscriber import Subscriber


class Snapshot:
    """One stream's snapshot: read the log up to the hub's position, write the latest record of each key."""

    __slots__ = ("budget", "control", "reads", "state", "sub")

    def __init__(
        self, state: HubState, control: HubControl, sub: Subscriber, reads: BacklogSession, budget: int
    ) -> None:
        self.state = state
        self.control = control
        self.sub = sub
        self.reads = reads
        self.budget = budget  # bytes per write

    def ended_by_now(self) -> bool:
        """Whether the stream is over, once the ends due by now have run (:mod:`streams.fanout.cutoffs`)."""
        self.state.cutoffs.run_due()
        return self.sub.is_closed

    async def run(self) -> None:
        """Latest value per key from the retained log (tombstoned keys left out).

        Entries go out partition by partition in offset order; each id says
        "earlier partitions done, this one up to here, later ones from the
        start", so a resume mid-snapshot replays (never loses) the rest.
        """
        state, sub = self.state, self.sub
        positions = sub.positions
        assert positions is not None
        start = dict(positions)
        end = dict(state.positions)
        latest, keyless = await self.read(start, end)
        frames: list[bytes] = []
        pending = 0
        for index, p in enumerate(state.partitions):
            kept = sorted([*latest[p].values(), *keyless[p]], key=lambda r: r.offset)
            for record in kept:
                if not sub.filters.admits(record) or not state.admits(sub, record):
                    continue
                progress = progress_encode(
                    {q: (end[q] if i < index else start[q]) for i, q in enumerate(state.partitions) if q != p}
                    | {p: record.offset + 1}
                )
                frame = record.frame(progress, sub.form, sub.binary)
                if frame is None:
                    state.counters.invalid += 1
                    continue
                frames.append(frame)
                pending += len(frame)
                if len(frames) >= CHUNK_RECORDS or pending >= self.budget:
                    if self.ended_by_now():
                        return
                    if not sub.sink.write(b"".join(frames)):
                        self.control.cut(sub)
                        return
                    self.count(len(frames), pending)
                    frames.clear()
                    pending = 0
                    await sub.sink.writable()
        positions.update(end)
        sub.sent_progress = progress_encode(positions)
        events = len(frames)
        frames.append(checkpoint_frame(sub.sent_progress))
        if self.ended_by_now():
            return
        if not sub.sink.write(b"".join(frames)):
            self.control.cut(sub)
        else:
            self.count(events, pending)

    async def read(
        self, start: dict[int, int], end: dict[int, int]
    ) -> tuple[dict[int, dict[bytes, Record]], dict[int, list[Record]]]:
        """The latest record per key, and every keyless record, of each partition between ``start`` and ``end``."""
        partitions = self.state.partitions
        latest: dict[int, dict[bytes, Record]] = {p: {} for p in partitions}
        keyless: dict[int, list[Record]] = {p: [] for p in partitions}
        cursor = dict(start)
        while True:
            ranges = {p: (cursor[p], end[p]) for p in partitions if cursor[p] < end[p]}
            if not ranges:
                return latest, keyless
            records, reached = await self.reads.read(ranges)
            for record in records:
                if record.key is None:
                    keyless[record.partition].append(record)
                elif record.value is None:
                    latest[record.partition].pop(record.key, None)
                else:
                    latest[record.partition][record.key] = record
            for p, offset in reached.items():
                cursor[p] = max(cursor[p], offset)

    def count(self, events: int, size: int) -> None:
        sub = self.sub
        counts = self.state.tally(sub.route)
        counts.delivered += events
        counts.bytes += size
        sub.events += events
        sub.bytes += size
