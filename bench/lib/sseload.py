"""The SSE load client: many streams on one asyncio loop, parsing ``seq`` and ``ts`` into a latency histogram."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# Latency histogram: 100 us buckets up to 60 s (anything later lands in the last one).
BUCKET_NS = 100_000


BUCKETS = 600_000


DATA_FIND = re.compile(rb'data: \{"seq":(\d+),"ts":(\d+)').findall


@dataclass
class Stats:
    """What every client of one scenario adds to (one object, so the hot path stays local)."""

    hist: list[int] = field(default_factory=lambda: [0] * BUCKETS)
    max_ns: int = 0
    events: int = 0
    last_ns: int = 0
    measuring: bool = False
    disconnects: int = 0
    # Per produce-second of the run: [events, latency sum, latency max] (for --timeline).
    per_second: list[list[int]] = field(default_factory=list)
    seq_per_second: int = 1
    timeline: bool = False
    reads: int = 0


class SseClient(asyncio.Protocol):
    """One stream over HTTP/1.1: chunked decoding and just enough SSE to find ``seq`` and ``ts``."""

    def __init__(self, request: bytes, stats: Stats, expected: int, ready_on_headers: bool = False) -> None:
        loop = asyncio.get_running_loop()
        # Peers that send nothing before the first event are ready once the response head arrived.
        self.ready_on_headers = ready_on_headers
        self.request = request
        self.stats = stats
        self.seen = bytearray(expected)
        # Distinct events this client should get (fewer than ``expected`` when it filters).
        self.want = expected
        self.unique = 0
        self.duplicates = 0
        self.status = 0
        self.head = b""
        self.chunked = False
        self.raw = b""
        self.text = b""
        self.ready: asyncio.Future[None] = loop.create_future()
        self.done: asyncio.Future[None] = loop.create_future()
        self.transport: asyncio.Transport | None = None
        self.error: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stats.measuring:
            self.stats.disconnects += 1
        self._fail(f"connection lost: {exc}")
        if not self.done.done():
            self.done.set_result(None)

    def _fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(reason))

    def data_received(self, data: bytes) -> None:
        now = time.time_ns()
        self.stats.reads += 1
        if not self.status:
            head = self.head + data
            end = head.find(b"\r\n\r\n")
            if end < 0:
                self.head = head
                return
            self.head = b""
            self.status = int(head.split(b" ", 2)[1])
            if self.status != 200:
                self._fail(f"HTTP {self.status}: {head[:300]!r}")
                assert self.transport is not None
                self.transport.close()
                return
            self.chunked = b"transfer-encoding: chunked" in head[:end].lower()
            data = head[end + 4 :]
            if self.ready_on_headers and not self.ready.done():
                self.ready.set_result(None)
        if self.chunked:
            data = self._dechunk(data)
        if not data:
            return
        text = self.text + data if self.text else data
        end = text.rfind(b"\n\n")
        if end < 0:
            self.text = text
            return
        self.text = text[end + 2 :]
        if not self.ready.done():
            self.ready.set_result(None)
        # Complete events end before `end`; the data line of ours starts {"seq":N,"ts":T (see payload_make).
        # One findall over them is ~3x cheaper than splitting into events and finding each data line.
        found = DATA_FIND(text, 0, end)
        if not found:
            return  # the preamble, a checkpoint or a heartbeat
        stats = self.stats
        hist = stats.hist
        seen = self.seen
        per_second = stats.per_second if stats.timeline else None
        per_slot = stats.seq_per_second
        max_ns = stats.max_ns
        unique = 0
        for seq_text, ts_text in found:
            seq = int(seq_text)
            latency = now - int(ts_text)
            if latency > max_ns:
                max_ns = latency
            bucket = latency // BUCKET_NS
            if not 0 <= bucket < BUCKETS:  # a clock step; keep it out of the other end of the list
                bucket = 0 if bucket < 0 else BUCKETS - 1
            hist[bucket] += 1
            if seen[seq]:
                self.duplicates += 1
            else:
                seen[seq] = 1
                unique += 1
            if per_second is not None:
                slot = per_second[seq // per_slot]
                slot[0] += 1
                slot[1] += latency
                if latency > slot[2]:
                    slot[2] = latency
        stats.max_ns = max_ns
        stats.events += len(found)
        stats.last_ns = now
        self.unique += unique
        if self.unique >= self.want and not self.done.done():
            self.done.set_result(None)

    def _dechunk(self, data: bytes) -> bytes:
        buf = self.raw + data if self.raw else data
        out: list[bytes] = []
        pos = 0
        size_of = len(buf)
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            start = eol + 2
            stop = start + size
            if stop + 2 > size_of:
                break
            pos = stop + 2
            if size == 0:
                break
            out.append(buf[start:stop])
        self.raw = buf[pos:]
        return out[0] if len(out) == 1 else b"".join(out)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


async def clients_open(
    port: int,
    count: int,
    stats: Stats,
    expected: int,
    *,
    path_of: Callable[[int], str],
    want_of: Callable[[int], int] | None = None,
    ready_on_headers: bool = False,
    first: int = 0,
    concurrency: int = 50,
    tolerate_failures: bool = False,
) -> list[SseClient]:
    """Open ``count`` streams (numbered from ``first``), at most ``concurrency`` at a time, each until it is ready.

    ``path_of(n)`` is stream n's request path and ``want_of(n)`` how many events it should get (all of
    ``expected`` unless it filters). With ``tolerate_failures`` a stream that cannot open is reported and left out.
    """
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(concurrency)
    opened: list[SseClient] = []

    async def one(index: int) -> None:
        request = (
            f"GET {path_of(index)} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            "Cache-Control: no-cache\r\n\r\n"
        ).encode()
        async with gate:
            try:
                _, client = await loop.create_connection(
                    lambda: SseClient(request, stats, expected, ready_on_headers), "127.0.0.1", port
                )
                if want_of is not None:
                    client.want = want_of(index)
                await asyncio.wait_for(client.ready, timeout=30)
                opened.append(client)
            except (OSError, TimeoutError, ConnectionError) as exc:
                if not tolerate_failures:
                    raise
                print(f"    stream {index} failed to open: {exc!r}", flush=True)

    await asyncio.gather(*(one(first + i) for i in range(count)))
    return opened


async def http_get(port: int, path: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    body = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    return body.decode("utf-8", "replace")


def metric_sum(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def percentile(hist: list[int], total: int, fraction: float) -> float:
    """The bucket's upper edge, in ms, at which ``fraction`` of the events are in."""
    wanted = max(1, int(total * fraction + 0.999999))
    seen = 0
    for index, count in enumerate(hist):
        seen += count
        if seen >= wanted:
            return (index + 1) * BUCKET_NS / 1e6
    return float("nan")
