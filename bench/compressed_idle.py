"""What an idle compressed stream holds in the gateway: RSS per stream, br, gzip and plain, on the real server.

For each coding a fresh gateway (one worker, the embedded broker) gets ``--base``
streams, then ``--clients`` more that ask for it (``Accept-Encoding``) on a route that
compresses, with a heartbeat every ``--heartbeat`` seconds. RSS is read five times:
with the streams just opened (their preamble written), after ``--events`` demo score
events reached every stream, once each stream has had a heartbeat since (idle), the
same after the gateway's C heap was trimmed (``malloc_trim``: what the streams let go
of stays in RSS, free for the next compressor, until then), and after ``--more``
events more (active again). Each figure is the growth over the base,
per stream. The clients decode every stream as it arrives (an event counts once its
bytes decode), so a stream that broke would stall the run::

    python bench/compressed_idle.py --clients 2000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path

import brotli

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.compression import score_payloads
from bench.lib.inside import signal_answer, site_install
from bench.lib.processes import Gateway
from bench.lib.procstats import process_tree, tree_rss_bytes
from streams.server.broker import EmbeddedBroker, topic_ensure

CODINGS = ("identity", "gzip", "br")

# Inside the gateway: SIGUSR2 hands the C heap's free pages back to the system (glibc's malloc_trim),
# to tell memory a stream let go of (free for the next compressor, still in RSS) from memory it holds.
SITECUSTOMIZE = """
import ctypes, os, signal
def _trim(signum, frame):
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    target = os.environ["SLUICE_BENCH_TRIMMED"] + "." + str(os.getpid())
    open(target + ".tmp", "w").close()
    os.replace(target + ".tmp", target)
signal.signal(signal.SIGUSR2, _trim)
"""


class DecodingClient(asyncio.Protocol):
    """One stream over HTTP/1.1: dechunked, decoded as its ``Content-Encoding`` says, events counted."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.head = b""
        self.status = 0
        self.raw = b""
        self.decode: Callable[[bytes], bytes] = bytes
        self.text = b""
        self.events = 0
        self.chunks_after_event = 0  # writes since the last event (a heartbeat, on an idle stream)
        self.ready = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.request)  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        if not self.status:
            head = self.head + data
            end = head.find(b"\r\n\r\n")
            if end < 0:
                self.head = head
                return
            self.status = int(head.split(b" ", 2)[1])
            lower = head[:end].lower()
            if b"content-encoding: br" in lower:
                self.decode = brotli.Decompressor().process
            elif b"content-encoding: gzip" in lower:
                self.decode = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress
            data = head[end + 4 :]
        self.raw += data
        while True:  # chunked: "<size>\r\n<bytes>\r\n"
            eol = self.raw.find(b"\r\n")
            if eol < 0:
                return
            size = int(self.raw[:eol], 16)
            if len(self.raw) < eol + 2 + size + 2:
                return
            chunk, self.raw = self.raw[eol + 2 : eol + 2 + size], self.raw[eol + 4 + size :]
            self.text += self.decode(chunk)
            self.chunks_after_event += 1
            frames = self.text.split(b"\n\n")
            self.text = frames.pop()
            found = sum(1 for frame in frames if b"\ndata: " in b"\n" + frame)
            if found:
                self.events += found
                self.chunks_after_event = 0
            if not self.ready.done():
                self.ready.set_result(None)


async def streams_open(port: int, path: str, coding: str, count: int) -> list[DecodingClient]:
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(100)
    accept = "" if coding == "identity" else f"Accept-Encoding: {coding}\r\n"
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n{accept}\r\n".encode()
    opened: list[DecodingClient] = []

    async def one() -> None:
        async with gate:
            _, client = await loop.create_connection(lambda: DecodingClient(request), "127.0.0.1", port)
            await asyncio.wait_for(client.ready, timeout=30)
            opened.append(client)

    await asyncio.gather(*(one() for _ in range(count)))
    return opened


async def until(what: str, done: Callable[[], bool], within: float = 120.0) -> None:
    deadline = time.monotonic() + within
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {within:.0f} s for {what}")
        await asyncio.sleep(0.1)


async def coding_measure(coding: str, broker: EmbeddedBroker, tmp: Path, args: argparse.Namespace) -> list[float]:
    """KiB per stream over the base: opened, after the events, idle after a heartbeat (and trimmed), active again."""
    from confluent_kafka import Producer

    topic = f"bench-compressed-{uuid.uuid4().hex[:8]}"
    topic_ensure(broker.bootstrap, topic)
    gateway = Gateway(f"sqlite:///{tmp}/{coding}.sqlite3", broker.bootstrap, tmp / f"{coding}.log")
    gateway.env["SLUICE_BROTLI_MAX_STREAMS"] = str(args.base + args.clients + 1)
    gateway.manage("migrate", "--verbosity", "0")
    gateway.manage(
        "shell",
        "-c",
        "from streams.services import route_upsert; "
        f"route_upsert(path='/bench/z', topic={topic!r}, compression=True, heartbeat_seconds={args.heartbeat})",
    )
    gateway.start()
    assert gateway.process is not None
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "log_level": 0})
    payloads = iter(score_payloads(args.events + args.more))
    clients: list[DecodingClient] = []
    try:
        base = await streams_open(gateway.port, "/bench/z", "identity", args.base)
        await asyncio.sleep(2.0)
        pids = process_tree(gateway.process.pid)
        before = tree_rss_bytes(pids)
        clients = await streams_open(gateway.port, "/bench/z", coding, args.clients)
        assert all(c.status == 200 for c in clients)
        per_stream = [(tree_rss_bytes(pids) - before) / args.clients / 1024]
        for total in (args.events, args.events + args.more):
            for _ in range(total - clients[0].events):
                producer.produce(topic, next(payloads).encode())
            producer.flush(10)
            await until(f"{total} events on every stream", lambda n=total: all(c.events >= n for c in clients))
            per_stream.append((tree_rss_bytes(pids) - before) / args.clients / 1024)
            if total == args.events:
                await until("a heartbeat on every stream", lambda: all(c.chunks_after_event for c in clients))
                await asyncio.sleep(1.0)
                per_stream.append((tree_rss_bytes(pids) - before) / args.clients / 1024)
                for pid in pids:
                    signal_answer(pid, signal.SIGUSR2, Path(f"{os.environ['SLUICE_BENCH_TRIMMED']}.{pid}"))
                per_stream.append((tree_rss_bytes(pids) - before) / args.clients / 1024)
        for client in base:
            assert client.transport is not None
            client.transport.abort()
    finally:
        for client in clients:
            if client.transport is not None:
                client.transport.abort()
        gateway.stop()
    return per_stream


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--base", type=int, default=50)
    parser.add_argument("--events", type=int, default=10)
    parser.add_argument("--more", type=int, default=10)
    parser.add_argument("--heartbeat", type=int, default=2)
    parser.add_argument("--codings", default=",".join(CODINGS))
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    broker = EmbeddedBroker().start()
    rows = {}
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            site_install(Path(tmp_name), SITECUSTOMIZE, SLUICE_BENCH_TRIMMED=f"{tmp_name}/trimmed")
            for coding in args.codings.split(","):
                rows[coding] = await coding_measure(coding, broker, Path(tmp_name), args)
    finally:
        broker.stop()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"| coding | opened | after {args.events} events | idle (after a heartbeat) | idle, trimmed "
        f"| {args.more} events more |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for coding, values in rows.items():
        print(f"| {coding} | " + " | ".join(f"{value:.1f} KiB" for value in values) + " |")


if __name__ == "__main__":
    asyncio.run(main())
