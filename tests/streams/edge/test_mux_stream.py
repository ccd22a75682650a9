"""The multiplexed stream in process: members that end alone, members that end it all, one challenge."""

from __future__ import annotations

import asyncio
import json

from streams.core.ids import progress_encode
from streams.core.mux.frames import kafka_part
from streams.core.mux.ids import composite_decode
from streams.core.mux.members import MemberSpec
from streams.core.routes import RouteTable
from streams.edge.authorization.reconfiguration import OpenStream, OpenStreams
from streams.edge.streaming.mux_stream import MuxStream
from streams.edge.streaming.routeset import Member
from streams.fanout.sinks import Sink
from tests.support.route_specs import route_spec
from tests.support.sse_client import Event, EventParser


class ListSink:
    """The shared connection: what was written, in order."""

    def __init__(self) -> None:
        self.limit = 1 << 20
        self.last_write = 0.0
        self.written = bytearray()
        self.aborted = False

    def write(self, data: bytes) -> bool:
        self.written += data
        return True

    async def writable(self) -> None:
        return None

    def pending(self) -> int:
        return 0

    def congested(self) -> bool:
        return False

    def abort(self) -> None:
        self.aborted = True

    def events(self) -> list[Event]:
        return EventParser().feed(bytes(self.written))


class FakeSource:
    """A member's source as a hub subscription behaves: a preamble on attach, then what it is told to write."""

    def __init__(self, start: dict[int, int]) -> None:
        self.start = start
        self.sink: Sink | None = None
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.close_reason: str | None = None
        self.detached = False

    def attach(self, sink: Sink) -> None:
        self.sink = sink
        sink.write(f"retry: 2000\nid: {progress_encode(self.start)}\n\n".encode())

    def send(self, offset: int, data: str) -> None:
        assert self.sink is not None
        self.sink.write(f"id: {progress_encode({0: offset + 1})}\ndata: {data}\n\n".encode())

    def end(self, reason: str) -> None:
        if not self.closed.done():
            self.close_reason = reason
            self.closed.set_result(reason)

    def challenge(self) -> None:
        raise AssertionError("a multiplexed stream challenges once, itself")

    def detach(self) -> None:
        self.detached = True


def mux_of(count: int) -> tuple[MuxStream, list[FakeSource], ListSink, OpenStreams]:
    members, sources = [], []
    for index in range(count):
        source = FakeSource({0: 0})
        route = route_spec(index + 1, f"/r{index}")
        members.append(
            Member(MemberSpec(f"m{index}", f"/r{index}"), route, {}, source=source, start=kafka_part("AQIAAA=="))
        )
        sources.append(source)
    mux, sink, watched = MuxStream(members, 2000), ListSink(), OpenStreams()
    mux.attach(sink)
    for member in members:
        assert member.source is not None
        watched.add(OpenStream(member.route, {"type": "http", "headers": []}, {}, member.source.end))
    return mux, sources, sink, watched


async def test_a_member_whose_route_goes_ends_alone_and_the_others_go_on() -> None:
    mux, sources, sink, watched = mux_of(3)
    sources[1].send(0, "before")
    kept = (route_spec(1, "/r0"), route_spec(3, "/r2"))
    assert await watched.reconcile(RouteTable(kept)) == 1
    await asyncio.sleep(0)  # the member's end reaches the stream by its future's callback
    sources[0].send(0, "after")
    sources[1].send(1, "never")  # an ended member writes nothing more
    events = [e for e in sink.events() if e.has_data]
    assert [(e.type, e.data) for e in events] == [
        ("m1", "before"),
        ("ended", json.dumps({"member": "m1", "reason": "route_removed"}, separators=(",", ":"))),
        ("m0", "after"),
    ]
    assert not mux.closed.done()
    # The last id still holds the ended member's position, so a resume of all three loses nothing.
    last = events[-1].id
    assert last is not None
    assert composite_decode(last, 3) == [kafka_part(progress_encode({0: 1}))] * 2 + [kafka_part("AQIAAA==")]


async def test_when_every_member_has_ended_the_stream_ends() -> None:
    mux, sources, _, _ = mux_of(2)
    sources[0].end("unauthorized")
    sources[1].end("route_removed")
    await asyncio.sleep(0)
    assert mux.closed.done()
    assert mux.close_reason == "ended"


async def test_other_ends_end_the_whole_stream() -> None:
    mux, sources, _, _ = mux_of(3)
    sources[2].end("slow")
    await asyncio.sleep(0)
    assert mux.close_reason == "slow"
    assert [source.close_reason for source in sources] == ["slow", "slow", "slow"]
    mux.detach()
    assert all(source.detached for source in sources)


async def test_deadlines_firing_together_send_one_challenge() -> None:
    mux, _, sink, _ = mux_of(2)
    mux.challenge()
    mux.challenge()
    assert [e.type for e in sink.events()].count("challenge") == 1


async def test_heartbeats_follow_the_connection_not_the_member() -> None:
    _, sources, sink, _ = mux_of(2)
    assert sources[0].sink is not None
    assert sources[1].sink is not None
    sink.last_write = 123.0
    assert sources[0].sink.last_write == sources[1].sink.last_write == 123.0
