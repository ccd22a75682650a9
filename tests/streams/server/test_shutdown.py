"""SIGTERM ends every open stream cleanly (a whole last frame, then the chunked terminator) before exiting."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

import pytest

from tests.conftest import Gateway
from tests.support.sse_client import EventParser

pytestmark = pytest.mark.services

WAIT = 30.0


async def raw_stream(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"transfer-encoding: chunked" in head.lower()
    return reader, writer


def chunks_decode(body: bytes) -> tuple[bytes, bool]:
    """The payload of a chunked body, and whether it ended with the zero-length chunk."""
    out = b""
    while body:
        size_line, sep, rest = body.partition(b"\r\n")
        if not sep:
            return out, False
        size = int(size_line, 16)
        if size == 0:
            return out, rest.startswith(b"\r\n")
        if len(rest) < size + 2:
            return out + rest[:size], False
        out += rest[:size]
        body = rest[size + 2 :]
    return out, False


async def test_sigterm_finishes_each_stream_then_exits(gateway_factory: Callable[..., Gateway], kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/shutdown/{topic}", topic="${params.topic}", initial="earliest", heartbeat_seconds=3600)
    for n in range(20):
        kafka.produce(topic, f"m{n}", partition=n % 2, flush=False)
    kafka.flush()
    own = gateway_factory()
    assert own.process is not None
    streams = [await raw_stream(own.port, f"/shutdown/{topic}") for _ in range(5)]
    bodies = [b""] * len(streams)

    async def read_until(index: int, condition: Callable[[bytes], bool]) -> None:
        reader = streams[index][0]
        while not condition(bodies[index]):
            chunk = await reader.read(65536)
            if not chunk:
                return
            bodies[index] += chunk

    await asyncio.wait_for(
        asyncio.gather(*(read_until(i, lambda b: b"data: m19" in b and b"data: m18" in b) for i in range(5))), WAIT
    )
    started = time.monotonic()
    own.process.send_signal(signal.SIGTERM)
    await asyncio.wait_for(asyncio.gather(*(read_until(i, lambda b: False) for i in range(5))), WAIT)
    ended_in = time.monotonic() - started
    assert await asyncio.to_thread(own.process.wait, WAIT) == 0
    for body in bodies:
        payload, terminated = chunks_decode(body)  # the head was read by raw_stream
        assert terminated, body[-200:]
        assert payload.endswith(b"\n\n")  # the last frame is whole
        events = [e for e in EventParser().feed(payload) if e.has_data]
        assert sorted(e.data for e in events) == sorted(f"m{n}" for n in range(20))
    assert ended_in < 10.0
    for _, writer in streams:
        writer.close()


async def test_metrics_count_the_workers_tasks_descriptors_and_memory(gateway: Gateway) -> None:
    import httpx

    from tests.support.metrics_scrape import metrics_parse

    async with httpx.AsyncClient(base_url=gateway.url) as http:
        values = metrics_parse((await http.get("/metrics")).text)
    assert values["sluice_asyncio_tasks"] >= 1  # counted on the serving loop, not a thread's
    assert values["sluice_open_fds"] > 3
    assert values["sluice_threads"] >= 1
    assert values["sluice_rss_bytes"] > 10 * 1024 * 1024
