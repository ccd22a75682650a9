"""Compressed streams end to end: a real gateway and broker, each event decoded as soon as its bytes arrive.

A stream is compressed and flushed per write, so an incremental decoder fed only the
bytes received so far must give every event produced so far: nothing may wait in a
compressor's buffer for the next event.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import brotli
import httpx
import pytest

from tests.streams.edge.test_wire import WAIT
from tests.support.sse_client import Event, EventParser

pytestmark = pytest.mark.services


class Decoded:
    """An open compressed stream, decoded incrementally: the events a browser would see so far."""

    def __init__(self, response: httpx.Response) -> None:
        coding = response.headers.get("content-encoding", "")
        self.response = response
        self.feed: Callable[[bytes], bytes]
        if coding == "br":
            self.feed = brotli.Decompressor().process
        elif coding == "gzip":
            self.feed = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress
        else:
            self.feed = bytes
        self.raw = 0
        self.parser = EventParser()
        self.events: list[Event] = []
        self._chunks = response.aiter_raw()

    @property
    def data(self) -> list[str]:
        return [e.data for e in self.events if e.has_data]

    async def read_until(self, condition: Callable[[Decoded], bool]) -> None:
        async def read() -> None:
            while not condition(self):
                chunk = await anext(self._chunks)
                self.raw += len(chunk)
                self.events += self.parser.feed(self.feed(chunk))

        await asyncio.wait_for(read(), WAIT)


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


async def each_event_as_produced(client: httpx.AsyncClient, kafka: Any, path: str, topic: str, coding: str) -> None:
    async with client.stream("GET", path, headers={"accept-encoding": coding}) as response:
        assert response.status_code == 200
        assert response.headers["content-encoding"] == coding
        assert response.headers["vary"] == "Accept-Encoding"
        assert response.headers["cache-control"] == "no-cache, no-transform"
        assert response.headers["x-accel-buffering"] == "no"
        stream = Decoded(response)
        await stream.read_until(lambda s: bool(s.events))  # the start checkpoint
        for n in range(5):
            value = f'{{"match":"m-{n}","home":"Arsenal","away":"Chelsea","score":[{n},1]}}'
            kafka.produce(topic, value)
            # Only this event's bytes are needed to decode it: the write was flushed.
            await stream.read_until(lambda s, v=value: v in s.data)
            assert stream.data[-1] == value


@pytest.mark.parametrize("coding", ["br", "gzip"])
async def test_every_event_decodes_as_it_arrives(client, kafka, route, coding: str) -> None:
    topic = kafka.topic()
    route(path=f"/cz/{coding}/{{topic}}", topic="${params.topic}", compression=True, heartbeat_seconds=3600)
    await each_event_as_produced(client, kafka, f"/cz/{coding}/{topic}", topic, coding)


async def test_heartbeats_are_flushed_too(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/cz/hb/{topic}", topic="${params.topic}", compression=True, heartbeat_seconds=1)
    async with client.stream("GET", f"/cz/hb/{topic}", headers={"accept-encoding": "gzip"}) as response:
        assert response.headers["content-encoding"] == "gzip"
        stream = Decoded(response)
        await stream.read_until(lambda s: bool(s.events))
        # A heartbeat is a comment: it reaches the parser (a blank event) only if its bytes were flushed.
        before = stream.raw
        await stream.read_until(lambda s: s.raw > before and s.parser.comments > 0)


@pytest.mark.parametrize("coding", ["br", "gzip"])
async def test_a_stream_that_rested_through_heartbeats_goes_on_decoding(client, kafka, route, coding: str) -> None:
    # The compressor is let go after the preamble and each heartbeat, and taken again for the next event.
    topic = kafka.topic()
    route(path="/cz/rest/{topic}", topic="${params.topic}", compression=True, heartbeat_seconds=1)
    async with client.stream("GET", f"/cz/rest/{topic}", headers={"accept-encoding": coding}) as response:
        assert response.headers["content-encoding"] == coding
        stream = Decoded(response)
        await stream.read_until(lambda s: bool(s.events))
        for n in range(3):
            before = stream.raw
            await stream.read_until(lambda s, b=before: s.raw > b)  # a heartbeat (br: a metadata block)
            value = f'{{"match":"m-{n}","home":"Arsenal","score":[{n},1]}}'
            kafka.produce(topic, value)
            await stream.read_until(lambda s, v=value: v in s.data)
            assert stream.data == [f'{{"match":"m-{k}","home":"Arsenal","score":[{k},1]}}' for k in range(n + 1)]


async def test_plain_unless_the_route_compresses_or_the_client_accepts(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/cz/off/{topic}", topic="${params.topic}")
    route(path="/cz/on/{topic}", topic="${params.topic}", compression=True)
    for path, accept in ((f"/cz/off/{topic}", "br, gzip"), (f"/cz/on/{topic}", "identity")):
        async with client.stream("GET", path, headers={"accept-encoding": accept}) as response:
            assert response.status_code == 200
            assert "content-encoding" not in response.headers
            assert response.headers["vary"] == "Accept-Encoding"
            stream = Decoded(response)
            await stream.read_until(lambda s: bool(s.events))


async def test_the_multiplexed_stream_is_compressed_when_its_routes_are(client, kafka, route) -> None:
    scores, notes = kafka.topic(), kafka.topic()
    route(path=f"/cz/mx/{scores}", topic=scores, compression=True, heartbeat_seconds=3600)
    route(path=f"/cz/mx/{notes}", topic=notes, compression=True, heartbeat_seconds=3600)
    query = httpx.QueryParams([("s", f"/cz/mx/{scores}"), ("s", f"/cz/mx/{notes}")])
    async with client.stream("GET", "/streams", params=query, headers={"accept-encoding": "br"}) as response:
        assert response.status_code == 200
        assert response.headers["content-encoding"] == "br"
        stream = Decoded(response)
        await stream.read_until(lambda s: bool(s.events))
        kafka.produce(notes, "first note")
        await stream.read_until(lambda s: "first note" in s.data)


async def test_a_proxy_route_is_compressed_too(client, route, upstream_sse) -> None:
    path = "/cz/proxy/" + upstream_sse.url.rsplit(":", 1)[1]
    route(path=path, kind="sse-proxy", upstream=f"{upstream_sse.url}/fixed", topic="", compression=True)
    async with client.stream("GET", path, headers={"accept-encoding": "gzip"}) as response:
        assert response.status_code == 200
        assert response.headers["content-encoding"] == "gzip"
        stream = Decoded(response)
        await stream.read_until(lambda s: any(e.type == "last" for e in s.events))
        assert stream.data[-1] == "été ✓"
