"""The C load client (bench/lib/sseload.c) against a tiny SSE server in the test, counted as the Python client counts.

The server answers ``/s/<n>`` chunked for even n and as a plain body (closed at its end) for odd n,
writes its events in pieces (chunk-size lines, data lines and event ends split across reads, one
event of 200 KB), a heartbeat comment between them and one seq twice. ``/missing/<n>`` is a 404.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench.lib import cload  # noqa: E402
from bench.lib.sseload import BUCKET_NS, Stats, clients_open, percentile  # noqa: E402

pytestmark = pytest.mark.slow

COUNT = 20
DUPLICATE = 7
# Every event's ts is this much before it is written: its latency is at least that.
AGE_NS = 5_000_000
PAUSE = 0.02


def event(seq: int, pad: int = 4) -> bytes:
    ts = time.time_ns() - AGE_NS
    return b'id: %d\ndata: {"seq":%d,"ts":%d,"pad":"%s"}\n\n' % (seq, seq, ts, b"x" * pad)


class SseServer:
    """Sends, once ``go`` is set, the seqs each stream wants in awkward pieces.

    All of them, or with ``keys`` those equal to the stream's index modulo ``keys``.
    """

    def __init__(self, keys: int = 0) -> None:
        self.keys = keys
        self.go = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.port = 0
        self.handlers: set[asyncio.Task[None]] = set()
        self.peers: list[str] = []  # the address each connection came from

    async def __aenter__(self) -> SseServer:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        self.peers.append(writer.get_extra_info("peername")[0])
        try:
            await self.stream(reader, writer)
        finally:
            writer.close()

    async def stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"Accept: text/event-stream\r\n" in head
        assert b"Cache-Control: no-cache\r\n" in head
        path = head.split(b" ", 2)[1].decode()
        kind, index_text = path.strip("/").split("/")
        if kind != "s":
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        index = int(index_text)
        chunked = index % 2 == 0
        seqs = list(range(index % self.keys, COUNT, self.keys)) if self.keys else list(range(COUNT))
        seqs.insert(len(seqs) // 2, seqs[len(seqs) // 2 - 1] if self.keys else DUPLICATE)

        async def send(data: bytes, split: int | None = None) -> None:
            """``data`` as one chunk (chunked) or as is, in two writes a pause apart when ``split``."""
            if chunked:
                data = b"%x\r\n%s\r\n" % (len(data), data)
            pieces = [data] if split is None else [data[:split], data[split:]]
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
                if split is not None:
                    await asyncio.sleep(PAUSE)

        response = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        response += b"Transfer-Encoding: chunked\r\n\r\n" if chunked else b"\r\n"
        writer.write(response[:20])  # the head in two reads too
        await writer.drain()
        await asyncio.sleep(PAUSE)
        writer.write(response[20:])
        await send(b": preamble\n\n")
        await self.go.wait()
        for position, seq in enumerate(seqs):
            data = event(seq)
            if position == 4:  # an event longer than the C client's room for a partial one (64 KiB)
                data = event(seq, pad=200_000)
                for start in range(0, len(data), 70_000):
                    await send(data[start : start + 70_000])
                    await asyncio.sleep(PAUSE)
            elif position % 5 == 1:
                await send(data, split=1)  # the chunk-size line (or the first byte) alone
            elif position % 5 == 2:
                await send(data, split=len(data) - 1)  # all but the event's last "\n"
            elif position % 5 == 3:
                await send(data[:20])  # an event across two chunks
                await asyncio.sleep(PAUSE)
                await send(data[20:] + b": heartbeat\n\n")
            else:
                await send(data)
        if chunked:
            await asyncio.Event().wait()  # the stream stays open
        await asyncio.sleep(PAUSE)  # a plain body ends with the connection


async def python_counts(server: SseServer, streams: int) -> dict[str, int]:
    """What bench/lib/sseload.py's client counts for the same streams."""
    stats = Stats()
    keys = server.keys
    opened = await clients_open(
        server.port,
        streams,
        stats,
        COUNT,
        path_of=lambda index: f"/s/{index}",
        want_of=(lambda index: len(range(index % keys, COUNT, keys))) if keys else None,
    )
    stats.measuring = True
    server.go.set()
    await asyncio.wait([c.done for c in opened], timeout=10)
    await asyncio.sleep(0.2)  # the plain streams' ends
    for client in opened:
        client.close()
    return {
        "opened": len(opened),
        "events": stats.events,
        "unique": sum(c.unique for c in opened),
        "duplicates": sum(c.duplicates for c in opened),
        "want": sum(c.want for c in opened),
        "disconnects": stats.disconnects,
    }


@pytest.fixture(scope="module")
def binary() -> Path:
    if not cload.gcc_available():
        pytest.skip("gcc is not installed")
    return cload.build()


@pytest.fixture
async def server() -> AsyncIterator[SseServer]:
    async with SseServer() as running:
        yield running


@pytest.mark.parametrize(("keys", "poll_us"), [(0, 0), (3, 0), (0, 500)])
async def test_counts_as_the_python_client_does(binary: Path, keys: int, poll_us: int) -> None:
    streams = 4
    async with SseServer(keys) as server:
        clients = await cload.CClients(server.port, "/s/%d", COUNT, keys=keys, poll_us=poll_us).start()
        try:
            assert await clients.open(streams) == streams
            await clients.measure(True)
            started = time.time_ns()
            server.go.set()
            complete, closed, pending = await clients.wait(10.0)
            await asyncio.sleep(0.2)  # the plain streams' ends
            await clients.measure(False)
            report = await clients.report()
        finally:
            await clients.close()
    async with SseServer(keys) as server:
        expected = await python_counts(server, streams)

    assert (complete, closed, pending) == (streams, 0, 0)
    want = sum(len(range(index % keys, COUNT, keys)) for index in range(streams)) if keys else streams * COUNT
    assert report.opened == expected["opened"] == streams
    assert report.want == expected["want"] == want
    assert report.unique == expected["unique"] == want
    assert report.duplicates == expected["duplicates"] == streams
    assert report.stats.events == expected["events"] == want + streams
    assert report.stats.disconnects == expected["disconnects"] == streams // 2  # the plain ones closed
    assert report.failed == 0
    assert report.out_of_range == 0
    assert report.cpu_seconds >= 0
    assert report.stats.reads >= streams * 10  # the pieces came in reads of their own

    stats = report.stats
    assert sum(stats.hist) == stats.events
    assert stats.hist[: AGE_NS // BUCKET_NS].count(0) == AGE_NS // BUCKET_NS  # nothing younger than it was made
    p50 = percentile(stats.hist, stats.events, 0.5)
    assert AGE_NS / 1e6 <= p50 < 1000
    assert AGE_NS <= stats.max_ns < 5_000_000_000
    assert started <= stats.last_ns <= time.time_ns()


async def test_failures_are_reported_and_left_out(binary: Path, server: SseServer) -> None:
    async with cload.CClients(server.port, "/missing/%d", COUNT) as clients:
        assert await clients.open(2) == 0
        assert sorted(index for index, _ in clients.failures) == [0, 1]
        assert all(reason.startswith("HTTP 404") for _, reason in clients.failures)
        report = await clients.report()
        assert (report.opened, report.failed, report.want) == (0, 2, 0)
        assert await clients.wait(1.0) == (0, 0, 0)


async def test_ready_on_headers_and_the_wait_timeout(binary: Path, server: SseServer) -> None:
    async with cload.CClients(server.port, "/s/%d", COUNT, ready_on_headers=True) as clients:
        assert await clients.open(3, first=10) == 3  # nothing sent yet past the preamble
        started = time.monotonic()
        assert await clients.wait(0.3) == (0, 0, 3)  # no events: the timeout ends the wait
        assert 0.25 <= time.monotonic() - started < 5
        report = await clients.report()
        assert (report.opened, report.stats.events, report.stats.disconnects) == (3, 0, 0)


async def test_streams_beyond_the_keys_share_them(binary: Path) -> None:
    """With ``--keys``, ``%k`` is the index modulo the keys, and stream n wants what stream n mod keys wants."""
    keys, streams = 3, 6
    async with SseServer(keys) as server:
        clients = await cload.CClients(server.port, "/s/%k", COUNT, keys=keys).start()
        try:
            assert await clients.open(streams) == streams
            server.go.set()
            assert await clients.wait(10.0) == (streams, 0, 0)
            report = await clients.report()
        finally:
            await clients.close()
    want = 2 * sum(len(range(index, COUNT, keys)) for index in range(keys))
    assert (report.want, report.unique, report.duplicates, report.out_of_range) == (want, want, streams, 0)


async def test_a_seq_the_stream_does_not_want_is_not_counted_as_received(binary: Path) -> None:
    keys = 3
    async with SseServer(keys) as server:
        clients = await cload.CClients(server.port, "/s/1", COUNT, keys=keys).start()  # stream 0 gets stream 1's
        try:
            assert await clients.open(1) == 1
            server.go.set()
            await clients.wait(0.5)
            report = await clients.report()
        finally:
            await clients.close()
    sent = len(range(1, COUNT, keys)) + 1  # and the duplicate
    assert (report.unique, report.duplicates, report.out_of_range) == (0, 0, sent)


async def test_streams_spread_over_source_addresses(binary: Path, server: SseServer) -> None:
    async with cload.CClients(server.port, "/s/%d", COUNT, ready_on_headers=True, sources=3) as clients:
        assert await clients.open(6) == 6
    assert sorted(server.peers) == ["127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"]
