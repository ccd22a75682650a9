"""``sse-proxy`` routes end to end: a real upstream SSE server, the real gateway, bytes as sent (SPEC 3)."""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from streams.proxy.upstream import FieldDecoder, UpstreamEvent
from tests.conftest import Gateway, UpstreamServer
from tests.guards.test_admission_wire import bearer, guard  # noqa: F401 (fixture)
from tests.streams.edge.test_wire import QUIET, WAIT, Stream, open_stream
from tests.support.metrics_scrape import metrics_read
from tests.support.polling import condition_wait_async
from tests.support.sse_client import EventParser
from tests.support.tokens import mint
from tests.support.upstream_server import FIXED, event_fields

pytestmark = pytest.mark.services


@pytest.fixture
async def client(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


@pytest.fixture
def proxy_route(route: Any) -> Callable[..., str]:
    """Factory: an sse-proxy route to ``upstream``; returns its (unique) path."""

    def make(upstream: str, **fields: Any) -> str:
        path = f"/proxy/{uuid.uuid4().hex[:8]}"
        route(path=path, kind="sse-proxy", upstream=upstream, topic="", heartbeat_seconds=QUIET, **fields)
        return path

    return make


def decoded(raw: bytes) -> list[UpstreamEvent]:
    decoder = FieldDecoder()
    lines = raw.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [e for e in (decoder.decode(line) for line in lines) if e is not None]


def test_field_decoder_keeps_which_fields_a_block_had() -> None:
    events = decoded(FIXED)
    assert events == [
        UpstreamEvent(retry=1500),
        UpstreamEvent(id="a-1", event="score", data='{"home": 1}'),
        UpstreamEvent(id="a-2", data="first line\nsecond line without a space\n two spaces"),
        UpstreamEvent(id="a-3", data=""),
        UpstreamEvent(id="a-4"),
        UpstreamEvent(event="note", data="id: not-an-id\nevent: not-a-type"),
        UpstreamEvent(retry=700),
        UpstreamEvent(id="a-5", event="last", data="été ✓"),
    ]
    assert events[3].frame() == b"id: a-3\ndata: \n\n"
    assert events[4].frame() == b"id: a-4\n\n"


async def test_every_field_is_forwarded_unchanged(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/fixed", retry_ms=2500)
    async with open_stream(client, path) as stream:
        await stream.read_until(lambda s: any(e.type == "last" for e in s.events))
        upstream = EventParser()
        expected = upstream.feed(FIXED)
        # The gateway's own first block (its retry) comes before the upstream's.
        assert stream.raw.startswith(b"retry: 2500\n\n")
        assert [(e.id, e.type, e.data, e.has_data) for e in stream.events] == [
            (e.id, e.type, e.data, e.has_data) for e in expected
        ]
        assert stream.parser.retry == upstream.retry == 700
        assert stream.raw.endswith(
            b"retry: 1500\n\n"
            b'id: a-1\nevent: score\ndata: {"home": 1}\n\n'
            b"id: a-2\ndata: first line\ndata: second line without a space\ndata:  two spaces\n\n"
            b"id: a-3\ndata: \n\n"
            b"id: a-4\n\n"
            b"event: note\ndata: id: not-an-id\ndata: event: not-a-type\n\n"
            b"retry: 700\n\n"
            b"id: a-5\nevent: last\ndata: \xc3\xa9t\xc3\xa9 \xe2\x9c\x93\n\n"
        )


async def test_last_event_id_is_passed_upstream(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events")
    upstream_sse.publish(8)
    async with open_stream(client, path, headers={"last-event-id": "5"}) as stream:
        messages = await stream.read_messages(3)
    assert [(e.id, e.type, e.data) for e in messages] == [event_fields(n) for n in (6, 7, 8)]
    assert upstream_sse.log() == ["5"]


async def test_upstream_restart_mid_stream_delivers_every_event_once(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events", retry_ms=100)
    before = await metrics_read(client)
    async with open_stream(client, path) as stream:
        await condition_wait_async(lambda: upstream_sse.log() == [None], within=WAIT, what="the upstream opened")
        opened = await metrics_read(client)
        assert opened["sluice_proxy_upstreams"] >= 1
        assert opened["sluice_proxy_subscribers"] >= 1
        upstream_sse.publish(10)
        await stream.read_messages(10)
        upstream_sse.stop(signal.SIGKILL)  # no goodbye: the connection just drops
        # Published while the upstream was down: the restarted one has them, the gateway asks from its last id.
        upstream_sse.start(published=25)
        await stream.read_messages(25)
        upstream_sse.publish(5)
        messages = await stream.read_messages(30)
        assert [(e.id, e.type, e.data) for e in messages] == [event_fields(n) for n in range(1, 31)]
        after = await metrics_read(client)
        assert after["sluice_proxy_reconnects_total"] >= before.get("sluice_proxy_reconnects_total", 0) + 1
    assert upstream_sse.log() == ["10"]  # the new process's log: one re-open, from the last id


async def test_clients_without_last_id_share_one_upstream_connection(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events")
    streams: list[Stream] = []
    async with open_stream(client, path) as first:
        await condition_wait_async(lambda: upstream_sse.log() == [None], within=WAIT, what="the upstream opened")
        async with open_stream(client, path) as second, open_stream(client, path) as third:
            streams = [first, second, third]
            upstream_sse.publish(3)
            for stream in streams:
                assert [e.data for e in await stream.read_messages(3)] == ["event 1", "event 2", "event 3"]
    assert upstream_sse.log() == [None]


async def test_upstream_refusal_is_502_naming_its_status(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/refuse")
    response = await client.get(path)
    assert response.status_code == 502
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert (body["error"], body["status"], body["upstream_status"]) == ("upstream_refused", 502, 401)


async def test_upstream_that_does_not_answer_is_502_unavailable(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events")
    upstream_sse.stop()
    response = await client.get(path)
    assert response.status_code == 502
    assert response.json()["error"] == "upstream_unavailable"
    assert response.headers["retry-after"] == "5"


async def test_other_methods_are_405_and_options_lists_the_methods(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events")
    response = await client.put(path)
    assert (response.status_code, response.headers["allow"]) == (405, "GET, HEAD")
    response = await client.options(path)
    assert (response.status_code, response.headers["allow"]) == (204, "GET, HEAD, OPTIONS")


async def test_concurrent_first_opens_share_one_upstream(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events")

    opened = 0

    async def one() -> list[str]:
        nonlocal opened
        async with open_stream(client, path) as stream:
            opened += 1
            await stream.read_messages(2)
            return stream.data

    tasks = [asyncio.ensure_future(one()) for _ in range(5)]
    await condition_wait_async(lambda: opened == 5, within=WAIT, what="five streams open")
    upstream_sse.publish(2)
    results = await asyncio.wait_for(asyncio.gather(*tasks), WAIT)
    assert all(r == ["event 1", "event 2"] for r in results)
    assert upstream_sse.log() == [None]


class FakeSink:
    """A sink that takes ``room`` bytes and then reports the client over its bound."""

    def __init__(self, room: int) -> None:
        self.limit = room
        self.last_write = 0.0
        self.written = b""
        self.aborted = False

    def write(self, data: bytes) -> bool:
        self.written += data
        return len(self.written) <= self.limit

    async def writable(self) -> None:
        return None

    def pending(self) -> int:
        return 0

    def congested(self) -> bool:
        return False

    def abort(self) -> None:
        self.aborted = True


def sse_transport(count: int, seen: list[httpx.Request]) -> httpx.MockTransport:
    """Events 1..count of 100 bytes each, after the request's Last-Event-ID; then the response ends."""

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        after = int(request.headers.get("last-event-id", "0"))
        body = b"".join(f"id: {n}\ndata: {'x' * 100}\n\n".encode() for n in range(after + 1, count + 1))
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx.MockTransport(answer)


async def test_a_slow_proxy_client_is_cut_and_the_others_go_on() -> None:
    from streams.proxy.upstream import Upstreams

    seen: list[httpx.Request] = []
    registry = Upstreams(httpx.AsyncClient(transport=sse_transport(20, seen)))
    url = "http://upstream.test/events"
    try:
        (upstream, slow), (same, healthy) = await asyncio.gather(
            registry.subscribe(url, "0", retry_ms=1000, limit=1 << 20),
            registry.subscribe(url, "0", retry_ms=1000, limit=1 << 20),
        )
        assert same is upstream  # same last id, nothing delivered yet: one upstream request
        slow_sink, healthy_sink = FakeSink(room=500), FakeSink(room=1 << 20)
        upstream.attach(slow, slow_sink)
        upstream.attach(healthy, healthy_sink)
        await condition_wait_async(lambda: healthy_sink.written.count(b"data: ") == 20, within=WAIT, what="20 events")
        assert (slow.close_reason, slow_sink.aborted, registry.cut_slow) == ("slow", True, 1)
        assert healthy.close_reason is None
        assert upstream.last_id == "20"
        assert seen[0].headers["last-event-id"] == "0"
        assert [r.headers["last-event-id"] for r in seen[1:]] == ["20"] * len(seen[1:])  # re-opens from its last id
        assert not upstream.joinable  # it has delivered: a newcomer with id 0 gets its own upstream
    finally:
        await registry.close()


async def test_a_client_over_its_bound_before_its_head_is_out_is_cut_on_attach() -> None:
    from streams.proxy.upstream import Upstreams

    registry = Upstreams(httpx.AsyncClient(transport=sse_transport(20, [])))
    try:
        upstream, sub = await registry.subscribe("http://upstream.test/events", "0", retry_ms=1000, limit=500)
        await condition_wait_async(lambda: sub.closed.done(), within=WAIT, what="the cut")
        sink = FakeSink(room=1 << 20)
        upstream.attach(sub, sink)
        assert (sub.close_reason, sink.aborted, sink.written) == ("slow", True, b"")
    finally:
        await registry.close()


async def test_guarded_proxy_route_admits_challenges_and_ends_at_exp(
    client: httpx.AsyncClient,
    upstream_sse: UpstreamServer,
    proxy_route: Callable[..., str],
    guard: Callable[..., str],  # noqa: F811 (the fixture imported above)
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events", guard=guard(challenge=1), roles=["read:items"])
    assert (await client.get(path)).status_code == 401
    assert upstream_sse.log() == []  # refused before the upstream is asked
    expires = int(time.time()) + 2
    async with open_stream(client, path, headers=bearer(mint(exp=expires))) as stream:
        await condition_wait_async(lambda: upstream_sse.log() == [None], within=WAIT, what="the upstream opened")
        upstream_sse.publish(1)
        await stream.read_until(lambda s: any(e.type == "challenge" for e in s.events) and len(s.messages) >= 2)
        with pytest.raises(StopAsyncIteration):  # the gateway ends the response at exp
            await stream.read_until(lambda s: False)
        assert time.time() >= expires
    assert "event 1" in stream.data


async def test_last_event_id_with_a_line_end_is_400_not_sent_upstream(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, proxy_route: Callable[..., str]
) -> None:
    path = proxy_route(f"{upstream_sse.url}/events")
    response = await client.get(path, params={"lastEventId": "5\r\nx-injected: 1"})
    assert (response.status_code, response.json()["error"]) == (400, "invalid_last_event_id")
    assert upstream_sse.log() == []


async def test_route_schema_skips_upstream_events_once_per_event_and_moves_the_id() -> None:
    from streams.core.schemas import schema_validator_compile
    from streams.proxy.upstream import Upstreams

    body = b"".join(
        f"id: {n}\ndata: {data}\n\n".encode()
        for n, data in [(1, '{"n": 1}'), (2, '{"n": "two"}'), (3, "not json"), (4, '{"n": 4}')]
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    schema = schema_validator_compile(
        "counted", {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    )
    registry = Upstreams(httpx.AsyncClient(transport=httpx.MockTransport(answer)))
    url = "http://upstream.test/numbers"
    try:
        subscribed = await asyncio.gather(
            registry.subscribe(url, "0", retry_ms=1000, limit=1 << 20, schema=schema),
            registry.subscribe(url, "0", retry_ms=1000, limit=1 << 20, schema=schema),
            registry.subscribe(url, "0", retry_ms=1000, limit=1 << 20),
        )
        upstream = subscribed[0][0]
        assert all(same is upstream for same, _ in subscribed)
        sinks = [FakeSink(room=1 << 20) for _ in subscribed]
        for (_, sub), sink in zip(subscribed, sinks, strict=True):
            upstream.attach(sub, sink)
        await condition_wait_async(lambda: all(b"id: 4\n" in s.written for s in sinks), within=WAIT, what="event 4")
        checked = [EventParser().feed(sink.written) for sink in sinks]
        for events, sink in zip(checked[:2], sinks[:2], strict=True):
            assert [(e.id, e.data) for e in events if e.has_data] == [("1", '{"n": 1}'), ("4", '{"n": 4}')]
            assert b"id: 2\n\nid: 3\n\n" in sink.written  # skipped, but the last id moves past them
        assert [e.data for e in checked[2] if e.has_data] == ['{"n": 1}', '{"n": "two"}', "not json", '{"n": 4}']
        assert registry.schema_rejected == 2  # two events, whatever the number of clients that skip them
    finally:
        await registry.close()


async def test_quiet_relayed_streams_get_heartbeats(
    client: httpx.AsyncClient, upstream_sse: UpstreamServer, route: Any
) -> None:
    """One pass a second over every upstream's clients keeps quiet ones alive (no timer per connection)."""
    path = f"/proxy/{uuid.uuid4().hex[:8]}"
    route(path=path, kind="sse-proxy", upstream=f"{upstream_sse.url}/events", topic="", heartbeat_seconds=1)
    async with open_stream(client, path) as first, open_stream(client, path) as second:
        await first.read_until(lambda s: s.parser.comments >= 2)
        await second.read_until(lambda s: s.parser.comments >= 2)
        upstream_sse.publish(1)
        await first.read_until(lambda s: bool(s.messages))
    assert first.messages[0].data == "event 1"
