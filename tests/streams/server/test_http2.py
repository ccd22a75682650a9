"""HTTPS with HTTP/2: many streams on one connection, flow control per stream, challenge responses (SPEC 4.3, 7)."""

from __future__ import annotations

import asyncio
import re
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import DataReceived, StreamReset

from tests.conftest import Gateway, Kafka, UpstreamServer
from tests.guards.test_admission_wire import bearer, challenge_response, guard  # noqa: F401 (fixture)
from tests.streams.edge.test_wire import QUIET, WAIT, open_stream
from tests.support.metrics_scrape import metrics_read
from tests.support.polling import condition_wait_async
from tests.support.sse_client import EventParser
from tests.support.tokens import mint

pytestmark = pytest.mark.services

STREAMS = 50


@pytest.fixture
def tls_gateway(gateway_factory: Callable[..., Gateway]) -> tuple[Gateway, Path]:
    """A gateway of this test's own serving HTTPS with ``--self-signed``, and its certificate's path."""
    server = gateway_factory("--self-signed")
    (cert,) = {m.group(1) for line in server.output for m in [re.search(r"--cacert (\S+)\)", line)] if m}
    return server, Path(cert)


@pytest.fixture
async def h2(tls_gateway: tuple[Gateway, Path]) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP/2-only client limited to ONE connection, trusting the gateway's certificate."""
    server, cert = tls_gateway
    context = ssl.create_default_context(cafile=str(cert))
    async with httpx.AsyncClient(
        base_url=server.url,
        http1=False,
        http2=True,
        verify=context,
        limits=httpx.Limits(max_connections=1),
        timeout=httpx.Timeout(WAIT),
    ) as client:
        yield client


def alpn(response: httpx.Response) -> str | None:
    ssl_object = response.extensions["network_stream"].get_extra_info("ssl_object")
    return str(ssl_object.selected_alpn_protocol())


def connections(client: httpx.AsyncClient) -> int:
    return len(client._transport._pool.connections)  # type: ignore[attr-defined]


async def test_fifty_streams_share_one_h2_connection(h2: httpx.AsyncClient, kafka: Kafka, route: Any) -> None:
    topic = kafka.topic()
    path = f"/h2/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, initial="earliest", heartbeat_seconds=QUIET)
    for n in range(5):
        kafka.produce(topic, f"m{n}", key="k", flush=False)
    kafka.flush()
    opened: list[httpx.Response] = []

    async def one() -> list[str]:
        async with open_stream(h2, path) as stream:
            opened.append(stream.response)
            await stream.read_messages(5)
            return stream.data

    results = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(STREAMS))), WAIT)
    assert results == [[f"m{n}" for n in range(5)]] * STREAMS
    assert len(opened) == STREAMS
    assert {r.http_version for r in opened} == {"HTTP/2"}
    assert {alpn(r) for r in opened} == {"h2"}
    assert connections(h2) == 1


async def test_proxy_streams_over_h2(h2: httpx.AsyncClient, upstream_sse: UpstreamServer, route: Any) -> None:
    path = f"/h2proxy/{uuid.uuid4().hex[:8]}"
    route(path=path, kind="sse-proxy", upstream=f"{upstream_sse.url}/events", topic="", heartbeat_seconds=QUIET)
    async with open_stream(h2, path) as first, open_stream(h2, path) as second:
        await condition_wait_async(lambda: upstream_sse.log() == [None], within=WAIT, what="the upstream opened")
        upstream_sse.publish(3)
        for stream in (first, second):
            assert [e.data for e in await stream.read_messages(3)] == ["event 1", "event 2", "event 3"]
    assert connections(h2) == 1


class RawH2:
    """A bare HTTP/2 client (the ``h2`` library) that grants stream windows only as the test says.

    httpx opens every stream's window by 16 MiB, too wide to show the server's flow control;
    here a stream's window stays at the default 64 KiB until its data is acknowledged.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = H2Connection(H2Configuration(client_side=True))
        self.received: dict[int, bytes] = {}
        self.reset: set[int] = set()
        self.acknowledging: set[int] = set()
        self.alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol()

    @classmethod
    async def connect(cls, url: str, cert: Path) -> RawH2:
        host, port = url.removeprefix("https://").rsplit(":", 1)
        context = ssl.create_default_context(cafile=str(cert))
        context.set_alpn_protocols(["h2"])
        client = cls(*await asyncio.open_connection(host, int(port), ssl=context))
        client.conn.initiate_connection()
        client.conn.increment_flow_control_window(2**24)  # the connection's window: wide open
        client.writer.write(client.conn.data_to_send())
        return client

    def get(self, path: str, *, acknowledge: bool) -> int:
        stream_id = self.conn.get_next_available_stream_id()
        headers = [(":method", "GET"), (":path", path), (":scheme", "https"), (":authority", "localhost")]
        self.conn.send_headers(stream_id, headers, end_stream=True)
        self.writer.write(self.conn.data_to_send())
        self.received[stream_id] = b""
        if acknowledge:
            self.acknowledging.add(stream_id)
        return stream_id

    def acknowledge(self, stream_id: int) -> None:
        """From now on, and for what it already got, give ``stream_id`` its window back."""
        self.acknowledging.add(stream_id)
        self.conn.acknowledge_received_data(len(self.received[stream_id]), stream_id)
        self.writer.write(self.conn.data_to_send())

    async def read_until(self, condition: Callable[[], bool]) -> None:
        async def read() -> None:
            while not condition():
                chunk = await self.reader.read(65536)
                assert chunk, "the server closed the connection"
                for event in self.conn.receive_data(chunk):
                    if isinstance(event, DataReceived):
                        self.received[event.stream_id] += event.data
                        if event.stream_id in self.acknowledging:
                            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        else:  # the connection's window only: the stream's stays closed
                            self.conn.increment_flow_control_window(event.flow_controlled_length)
                    elif isinstance(event, StreamReset):
                        self.reset.add(event.stream_id)
                self.writer.write(self.conn.data_to_send())

        await asyncio.wait_for(read(), WAIT)

    def messages(self, stream_id: int) -> list[str]:
        return [e.data for e in EventParser().feed(self.received[stream_id]) if e.has_data]

    async def close(self) -> None:
        self.conn.close_connection()
        self.writer.write(self.conn.data_to_send())
        self.writer.close()


async def test_a_stream_nobody_reads_does_not_stall_the_others_on_its_connection(
    tls_gateway: tuple[Gateway, Path], h2: httpx.AsyncClient, kafka: Kafka, route: Any
) -> None:
    server, cert = tls_gateway
    topic = kafka.topic()
    path = f"/h2slow/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, heartbeat_seconds=QUIET, max_pending_bytes=8 * 1024 * 1024)
    payload = "x" * 1000

    def produce(numbers: range) -> list[str]:
        for n in numbers:
            kafka.produce(topic, f"{n:03d}{payload}", key="k", flush=False)
        kafka.flush()
        return [f"{n:03d}{payload}" for n in numbers]

    client = await RawH2.connect(server.url, cert)
    try:
        assert client.alpn == "h2"
        slow, fast = client.get(path, acknowledge=False), client.get(path, acknowledge=True)
        await client.read_until(lambda: all(b"retry: " in client.received[s] for s in (slow, fast)))
        sent = produce(range(300))  # ~300 KB: far past the slow stream's 64 KiB window
        await client.read_until(lambda: len(client.messages(fast)) >= 300)
        sent += produce(range(300, 400))
        await client.read_until(lambda: len(client.messages(fast)) >= 400)
        assert client.messages(fast) == sent
        assert len(client.received[slow]) < 70_000  # held at its window
        # The server saw that stream's window close (not the connection's) and stopped pushing to it.
        assert (await metrics_read(h2, topic))["sluice_slow_clients_deferred_total"] >= 1
        client.acknowledge(slow)  # it starts reading: it catches up, in order, nothing lost
        await client.read_until(lambda: len(client.messages(slow)) >= 400)
        assert client.messages(slow) == sent
    finally:
        await client.close()


async def test_a_proxy_client_past_its_bound_is_reset_and_its_connection_goes_on(
    tls_gateway: tuple[Gateway, Path], h2: httpx.AsyncClient, route: Any, upstream_sse: UpstreamServer
) -> None:
    server, cert = tls_gateway
    path = f"/h2proxyslow/{uuid.uuid4().hex[:8]}"
    upstream = f"{upstream_sse.url}/events"
    route(path=path, kind="sse-proxy", upstream=upstream, topic="", heartbeat_seconds=QUIET, max_pending_bytes=131072)
    client = await RawH2.connect(server.url, cert)
    try:
        slow, fast = client.get(path, acknowledge=False), client.get(path, acknowledge=True)
        await client.read_until(lambda: all(b"retry: " in client.received[s] for s in (slow, fast)))
        published = 0
        # Rounds of some 60 KB: the reader keeps up with each, the stream held at its window falls
        # further behind with each, until it is past max_pending_bytes and reset (RST_STREAM).
        for _ in range(20):
            published = upstream_sse.publish(2000)
            last = b"data: event %d\n" % published
            await client.read_until(lambda last=last: last in client.received[fast])
            if slow in client.reset:
                break
        assert slow in client.reset
        assert fast not in client.reset
        assert len(client.received[slow]) < 70_000
        assert [m.split("\n")[0] for m in client.messages(fast)] == [f"event {n}" for n in range(1, published + 1)]
        assert (await metrics_read(h2))["sluice_proxy_slow_clients_cut_total"] >= 1
    finally:
        await client.close()


async def test_challenge_and_challenge_response_on_one_h2_connection(
    h2: httpx.AsyncClient,
    kafka: Kafka,
    route: Any,
    guard: Callable[..., str],  # noqa: F811 (the fixture imported above)
) -> None:
    topic = kafka.topic()
    path = f"/h2reauth/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, guard=guard(challenge=2), roles=["read:items"], heartbeat_seconds=QUIET)
    expires = int(time.time()) + 3
    async with open_stream(h2, path, headers=bearer(mint(exp=expires))) as stream:
        await stream.read_until(lambda s: any(e.type == "challenge" for e in s.events))
        response = await h2.post(path, headers=challenge_response(mint(exp=expires + 60)))
        assert (response.status_code, response.http_version) == (204, "HTTP/2")
        await condition_wait_async(lambda: time.time() > expires + 1, within=WAIT, what="the first token's exp")
        kafka.produce(topic, "after the first exp", key="k")
        await stream.read_data("after the first exp")
        assert [(e.type, e.data) for e in stream.messages][-1] == ("message", "after the first exp")
    assert connections(h2) == 1


async def test_plain_http_1_1_still_works_over_tls(tls_gateway: tuple[Gateway, Path], kafka: Kafka, route: Any) -> None:
    server, cert = tls_gateway
    path = f"/h1/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=kafka.topic(), heartbeat_seconds=QUIET)
    async with httpx.AsyncClient(base_url=server.url, verify=ssl.create_default_context(cafile=str(cert))) as client:
        response = await client.head(path)
    assert (response.status_code, response.http_version) == (200, "HTTP/1.1")


async def test_a_stream_ending_on_an_h2_connection_leaves_the_others_open(
    h2: httpx.AsyncClient,
    kafka: Kafka,
    route: Any,
    guard: Callable[..., str],  # noqa: F811 (the fixture imported above)
) -> None:
    topic = kafka.topic()
    guarded, public = f"/h2end/{uuid.uuid4().hex[:8]}", f"/h2end/{uuid.uuid4().hex[:8]}"
    route(path=guarded, topic=topic, guard=guard(), roles=["read:items"], heartbeat_seconds=QUIET)
    route(path=public, topic=topic, heartbeat_seconds=QUIET)
    expires = int(time.time()) + 2
    async with (
        open_stream(h2, guarded, headers=bearer(mint(exp=expires))) as ending,
        open_stream(h2, public) as staying,
    ):
        await staying.started()
        with pytest.raises(StopAsyncIteration):  # the token's exp ends this stream only
            await ending.read_until(lambda s: False)
        kafka.produce(topic, "still here", key="k")
        assert await staying.read_data("still here") == ["still here"]
    assert connections(h2) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--self-signed", "--tls-cert", "c.pem", "--tls-key", "k.pem"], "not both"),
        (["--self-signed", "--workers", "2"], "plain HTTP only"),
    ],
)
def test_self_signed_refuses_what_it_cannot_do(args: list[str], message: str) -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=message):
        call_command("runstreams", *args)


def test_tls_options_offer_h2_first(tmp_path: Path) -> None:
    from streams.server.tls import ALPN_PROTOCOLS, self_signed_write, tls_options

    cert, key = self_signed_write(tmp_path)
    assert ALPN_PROTOCOLS == [b"h2", b"http/1.1"]
    assert tls_options(cert, key).getContext() is not None
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    (tmp_path / "empty.pem").write_text("")
    with pytest.raises(ValueError, match="no PEM certificate"):
        tls_options(tmp_path / "empty.pem", key)
