"""Where a new stream starts (SPEC 2.3): after its last event id, at ``since``, or at the route's initial position."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from streams.core.ids import EventId
from streams.fanout.access import TopicAccess, access_call
from streams.fanout.state import HubState

logger = logging.getLogger("sluice.hub")

INITIAL_EARLIEST = "earliest"
INITIAL_SNAPSHOT = "snapshot"


class PositionError(ValueError):
    """A last event id that does not fit the route's topic."""


@dataclass(slots=True)
class StartPlan:
    """Where a new stream starts: the next offset per partition, and how."""

    positions: dict[int, int]
    snapshot: bool = False
    since_ms: int | None = None
    since_partitions: set[int] = field(default_factory=set)


class StartPlanner:
    """Plans the start of a hub's new streams; asks Kafka only when the cache cannot answer."""

    __slots__ = ("access", "state")

    def __init__(self, state: HubState, access: TopicAccess) -> None:
        self.state = state
        self.access = access

    async def plan(self, *, last: EventId | None, initial: str, since_ms: int | None) -> StartPlan:
        state = self.state
        parts = state.partitions
        if last is not None:
            unknown = sorted(set(last.progress) - set(parts))
            if unknown:
                raise PositionError(
                    f"last event id names partition {unknown[0]}, but topic {state.topic} has {len(parts)}"
                )
            return await self._resume(dict(last.progress))
        if since_ms is not None:
            return await self._since(since_ms)
        if initial in (INITIAL_EARLIEST, INITIAL_SNAPSHOT):
            return StartPlan(await self.lows(), snapshot=initial == INITIAL_SNAPSHOT)
        return StartPlan(dict(state.positions))

    async def _resume(self, positions: dict[int, int]) -> StartPlan:
        """After a last event id: Kafka is asked (once) only if the id lies past the hub or before the cache."""
        state = self.state
        nxt, cache = state.positions, state.cache
        ahead = any(offset > nxt[p] for p, offset in positions.items())
        before_cache = len(positions) < len(state.partitions) or any(positions[p] < cache[p].start for p in positions)
        if ahead or before_cache:
            marks = await access_call(self.access, self.access.watermarks, state.topic, state.partitions)
            if ahead:
                self._clamp_past_end(positions, marks)
            if before_cache:
                self._start_at_log_start(positions, {p: low for p, (low, _) in marks.items()})
        return StartPlan(positions)

    def _clamp_past_end(self, positions: dict[int, int], marks: dict[int, tuple[int, int]]) -> None:
        """Offsets past the log's end (a recreated topic, a restored cluster) start at the end.

        An id a little ahead of this hub can be real (another instance read further):
        only offsets past the end Kafka reports are impossible. The start checkpoint
        then tells the truth, and everything produced afterwards is delivered. Where
        this hub saw the partition's log begin anew (the topic was deleted and created
        again), the id is of the old log: the stream gets the new log from its start.
        """
        state = self.state
        for p, offset in positions.items():
            # Some brokers report the last batch's base + 1 as the high watermark: the hub's position may be further.
            end = max(marks[p][1], state.positions[p])
            if offset > end:
                state.counters.clamped_past_end += 1
                restart = state.restarts.get(p)
                start = end if restart is None else min(max(restart, marks[p][0]), end)
                logger.warning(
                    "resume on %s partition %d: offset %d is past the end of the log (%d): starting at %s",
                    state.topic,
                    p,
                    offset,
                    end,
                    "the end" if restart is None else f"{start}, where the log began anew (the topic was recreated)",
                )
                positions[p] = start

    def _start_at_log_start(self, positions: dict[int, int], lows: dict[int, int]) -> None:
        """Partitions the id leaves out start at the log's start; offsets retention removed too, counted."""
        state = self.state
        for p in state.partitions:
            if p in positions and positions[p] < lows[p]:
                # Retention removed what the id names next: start at what is left, and say so.
                state.counters.gap_records += lows[p] - positions[p]
                logger.warning(
                    "resume on %s partition %d: offset %d is gone (the log starts at %d): %d records skipped",
                    state.topic,
                    p,
                    positions[p],
                    lows[p],
                    lows[p] - positions[p],
                )
            positions[p] = max(positions.get(p, lows[p]), lows[p])

    async def lows(self) -> dict[int, int]:
        """The first retained offset of each partition (the low watermarks)."""
        state = self.state
        marks = await access_call(self.access, self.access.watermarks, state.topic, state.partitions)
        return {p: low for p, (low, _) in marks.items()}

    async def _since(self, since_ms: int) -> StartPlan:
        state = self.state
        positions: dict[int, int] = {}
        # Ask Kafka for every partition, even when the cache holds records older than
        # `since`: timestamps need not grow with offsets, so a record before the cache
        # may still be newer. The cache serves the catch-up, not this answer.
        lookup = list(state.partitions)
        pending: set[int] = set()
        if lookup:
            # The broker's answer is only a lower bound (some answer 0), so the
            # catch-up also skips records older than `since` until the first newer one.
            found_offsets = await access_call(self.access, self.access.offsets_for_time, state.topic, lookup, since_ms)
            lows = await self.lows()
            for p in lookup:
                offset = found_offsets.get(p, -1)
                positions[p] = state.positions[p] if offset < 0 else max(offset, lows[p])
                if positions[p] < state.positions[p]:
                    pending.add(p)
        return StartPlan(positions, since_ms=since_ms, since_partitions=pending)
