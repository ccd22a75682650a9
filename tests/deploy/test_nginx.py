"""deploy/nginx.conf, as deployments use it, in front of two real gateways and a real broker.

An event written after a stream opened arrives through nginx at once (nothing buffers it),
Last-Event-ID reaches the gateway (a stream resumed through nginx starts after that id), and a
new stream skips a gateway that is down. Every wait is bounded and ends as soon as its condition holds.
"""

from __future__ import annotations

import asyncio
import re
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import brotli
import httpx
import pytest

from tests.conftest import Gateway, Kafka
from tests.deploy.nginx import NGINX_CONF, Nginx, nginx_binary
from tests.support.sse_client import Event, EventParser

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (Debian: apt-get install nginx-light)"),
]

WAIT = 30.0  # upper bound for any single wait; never an expectation of speed
# An event produced while a stream is open reaches the client through nginx within this; a proxy that
# buffered would hold it until its buffer filled or the heartbeat (an hour on these routes) came.
UNBUFFERED_WITHIN = 10.0
QUIET = 3600  # heartbeat_seconds: no keep-alive comment may push a buffered event out


class Stream:
    """An open event stream read through nginx: the events a browser would see."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.parser = EventParser()
        self.events: list[Event] = []
        self._chunks = response.aiter_raw()

    @property
    def data(self) -> list[str]:
        return [event.data for event in self.events if event.has_data]

    async def read_until(self, condition: Callable[[Stream], bool], limit: float = WAIT) -> Stream:
        async def read() -> None:
            while not condition(self):
                self.events += self.parser.feed(await anext(self._chunks))

        await asyncio.wait_for(read(), limit)
        return self


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, path: str, headers: dict[str, str] | None = None
) -> AsyncIterator[Stream]:
    async with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, (await response.aread()).decode("utf-8", "replace")
        yield Stream(response)


@pytest.fixture
def gateways(gateway_factory: Callable[..., Gateway]) -> list[Gateway]:
    return [gateway_factory(), gateway_factory()]


@pytest.fixture
def nginx(tmp_path: Path, gateways: list[Gateway]) -> Any:
    server = Nginx(tmp_path, [f"127.0.0.1:{gateway.port}" for gateway in gateways])
    checked = server.check()
    assert checked.returncode == 0, checked.stderr
    yield server.start()
    server.stop()


@pytest.fixture
async def client(nginx: Nginx) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=nginx.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


def test_the_file_is_a_valid_nginx_configuration(tmp_path: Path) -> None:
    server = Nginx(tmp_path, ["127.0.0.1:1", "127.0.0.1:2"])
    checked = server.check()
    assert checked.returncode == 0, checked.stderr
    assert "test is successful" in checked.stderr


def test_the_file_proxies_event_streams_as_they_need() -> None:
    directives = {" ".join(line.split()) for line in re.findall(r"^\s*([a-z_]+[^;{#]*);", NGINX_CONF.read_text(), re.M)}
    for needed in (
        "proxy_buffering off",
        "proxy_cache off",
        "proxy_http_version 1.1",
        'proxy_set_header Connection ""',
        "chunked_transfer_encoding on",
        "proxy_read_timeout 1h",
        "proxy_send_timeout 1h",
        "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for",
        "proxy_set_header X-Forwarded-Proto $scheme",
        "proxy_set_header Last-Event-ID $http_last_event_id",
        # Retried elsewhere only before the request reached a gateway; never http_5xx, never non_idempotent.
        "proxy_next_upstream error timeout",
        "keepalive 32",
    ):
        assert needed in directives, needed


async def test_a_stream_passes_through_unbuffered_and_resumes_with_last_event_id(
    client: httpx.AsyncClient, kafka: Kafka, route: Callable[..., Any]
) -> None:
    topic = kafka.topic()
    route(path="/lb/{topic}", topic="${params.topic}", initial="earliest", heartbeat_seconds=QUIET)
    kafka.produce(topic, "before-0")
    kafka.produce(topic, "before-1")

    async with open_stream(client, f"/lb/{topic}") as stream:
        await stream.read_until(lambda s: s.data == ["before-0", "before-1"])
        kafka.produce(topic, "after-open")
        await stream.read_until(lambda s: "after-open" in s.data, limit=UNBUFFERED_WITHIN)
    first = next(event for event in stream.events if event.data == "before-0")
    assert first.id is not None

    # Resumed after "before-0": the gateway read Last-Event-ID (without it, initial=earliest would
    # send "before-0" again). Each stream may land on either gateway: the ids are Kafka offsets.
    for _ in range(2):
        async with open_stream(client, f"/lb/{topic}", headers={"Last-Event-ID": first.id}) as resumed:
            await resumed.read_until(lambda s: len(s.data) >= 2)
            assert resumed.data[:2] == ["before-1", "after-open"]


async def test_a_new_stream_skips_a_gateway_that_is_down(
    client: httpx.AsyncClient, gateways: list[Gateway], kafka: Kafka, route: Callable[..., Any]
) -> None:
    topic = kafka.topic()
    route(path="/lb-down/{topic}", topic="${params.topic}", initial="earliest", heartbeat_seconds=QUIET)
    kafka.produce(topic, "only")
    gateways[0].stop()
    # Round robin sends some of these to the stopped gateway: its refused connection is passed on.
    for _ in range(4):
        async with open_stream(client, f"/lb-down/{topic}") as stream:
            await stream.read_until(lambda s: s.data == ["only"])


@pytest.mark.parametrize("coding", ["br", "gzip"])
async def test_a_compressed_stream_passes_through_unbuffered(
    client: httpx.AsyncClient, kafka: Kafka, route: Callable[..., Any], coding: str
) -> None:
    """Each event, compressed and flushed by the gateway, decodes from what nginx passed on so far."""
    topic = kafka.topic()
    route(path=f"/lbz/{coding}/{{topic}}", topic="${params.topic}", compression=True, heartbeat_seconds=QUIET)
    async with client.stream("GET", f"/lbz/{coding}/{topic}", headers={"accept-encoding": coding}) as response:
        assert response.status_code == 200
        # X-Accel-Buffering is nginx's own: it reads it and does not pass it on.
        assert response.headers["content-encoding"] == coding
        decode = brotli.Decompressor().process if coding == "br" else zlib.decompressobj(16 + zlib.MAX_WBITS).decompress
        stream = Stream(response)
        chunks = response.aiter_raw()
        stream._chunks = (decode(chunk) async for chunk in chunks)
        await stream.read_until(lambda s: bool(s.events))
        for n in range(3):
            kafka.produce(topic, f"compressed-{n}")
            await stream.read_until(lambda s, n=n: f"compressed-{n}" in s.data, limit=UNBUFFERED_WITHIN)
