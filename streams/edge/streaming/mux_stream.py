"""Several routes' streams as one response: ``GET /streams?s=alias:/path&s=...`` (docs/multiplexing.md).

Each member is opened as its route would open it (:mod:`streams.edge.streaming.opening`)
before the response starts. Then :class:`MuxStream` attaches every member to one
connection through a :class:`MemberSink` that relabels its frames and folds its
ids into the composite id. The members share the connection, its pending-bytes
bound, its per-address slot and one token deadline; a member that live
reconfiguration refuses ends alone, with an ``ended`` event.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence

from streams.core.closing import MEMBER_ALONE, CloseReason
from streams.core.mux.frames import MuxFramer, PartOf, kafka_part, proxy_part
from streams.edge.authorization.reauthorization import CHALLENGE_FRAME
from streams.edge.http.counters import challenges_sent, multiplexed_members, multiplexed_streams
from streams.edge.streaming.routeset import Member
from streams.edge.streaming.source import StreamSource, future_then
from streams.fanout.sinks import Sink

# Deadlines of several guarded members fire together: one challenge event for them all.
_CHALLENGE_GAP_SECONDS = 1.0


class MemberSink:
    """One member's :class:`Sink`: its frames go, relabelled, to the shared connection."""

    __slots__ = ("_mux", "_index")

    def __init__(self, mux: MuxStream, index: int) -> None:
        self._mux = mux
        self._index = index

    @property
    def limit(self) -> int:
        return self._mux.sink.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._mux.sink.limit = value

    @property
    def last_write(self) -> float:
        """The connection's: one member's event keeps every member's heartbeat away."""
        return self._mux.sink.last_write

    @last_write.setter
    def last_write(self, value: float) -> None:
        self._mux.sink.last_write = value

    def write(self, data: bytes) -> bool:
        return self._mux.member_write(self._index, data)

    async def writable(self) -> None:
        await self._mux.sink.writable()

    def pending(self) -> int:
        return self._mux.sink.pending()

    def congested(self) -> bool:
        return self._mux.sink.congested()

    def abort(self) -> None:
        self._mux.sink.abort()


class MuxStream:
    """A :class:`~streams.edge.streaming.source.StreamSource` over the members' own sources."""

    def __init__(self, members: Sequence[Member], retry_ms: int) -> None:
        self.members = list(members)
        self.retry_ms = retry_ms
        part_of: list[PartOf] = [proxy_part if m.is_proxy else kafka_part for m in members]
        self.framer = MuxFramer([m.alias for m in members], part_of, [m.start for m in members])
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.close_reason: str | None = None
        self.ended: set[int] = set()
        self._sink: Sink | None = None
        self._challenged = 0.0

    @property
    def sink(self) -> Sink:
        assert self._sink is not None
        return self._sink

    def on_closed(self, callback: Callable[[], object]) -> None:
        future_then(self.closed, callback)

    def sources(self) -> list[StreamSource]:
        return [m.source for m in self.members if m.source is not None]

    def attach(self, sink: Sink) -> None:
        self._sink = sink
        multiplexed_streams.inc()
        multiplexed_members.inc(len(self.members))
        if not sink.write(self.framer.preamble(self.retry_ms)):
            self.end(CloseReason.SLOW)
            return
        for index, member in enumerate(self.members):
            assert member.source is not None
            member.source.attach(MemberSink(self, index))
            member.source.closed.add_done_callback(functools.partial(self._member_closed, index))
            if self.closed.done():
                return

    def member_write(self, index: int, data: bytes) -> bool:
        if index in self.ended or self.closed.done():
            return True
        frames = self.framer.frames(index, data)
        return self.sink.write(frames) if frames else True

    def _member_closed(self, index: int, done: asyncio.Future[str]) -> None:
        if self.closed.done() or index in self.ended:
            return
        reason = done.result()
        if reason not in MEMBER_ALONE:
            self.end(reason)  # as it would end a single route's stream: the client comes back for all
            return
        self.ended.add(index)
        self.sink.write(self.framer.ended(index, reason))
        if len(self.ended) == len(self.members):
            self.end(CloseReason.ENDED)

    def end(self, reason: str) -> None:
        if self.closed.done():
            return
        self.close_reason = reason
        self.closed.set_result(reason)
        for source in self.sources():
            source.end(reason)

    def challenge(self) -> None:
        now = time.monotonic()
        if self.closed.done() or now - self._challenged < _CHALLENGE_GAP_SECONDS:
            return
        self._challenged = now
        for member in self.members:
            if member.route.guard is not None:
                challenges_sent.labels(member.route.pattern.source).inc()
        if not self.sink.write(CHALLENGE_FRAME):
            self.end(CloseReason.SLOW)

    def detach(self) -> None:
        for source in self.sources():
            source.detach()
        if self._sink is not None:
            multiplexed_streams.dec()
            multiplexed_members.dec(len(self.members))
