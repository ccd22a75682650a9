"""Which streams are compressed: the route's switch, its threshold, the client's Accept-Encoding, the server."""

from __future__ import annotations

import time
from types import SimpleNamespace

from streams.core.compression import BROTLI, GZIP
from streams.core.filters import FilterSet
from streams.edge.http.request import FLOW_KEY, StreamRequest
from streams.edge.streaming.kafka_stream import HubStream
from streams.edge.streaming.stream import stream_encoding
from streams.fanout.planning import StartPlan
from tests.streams.fanout.test_hub import make_hub
from tests.support.route_specs import route_spec


def request(accept: bytes | None, flow: bool = True) -> StreamRequest:
    scope = {"type": "http", "method": "GET", "headers": [(b"accept-encoding", accept)] if accept else []}
    if flow:
        scope[FLOW_KEY] = object()
    return StreamRequest.of(scope)


async def hub_source(route, mean_bytes: int | None) -> HubStream:
    hub = make_hub()
    if mean_bytes is not None:
        counts = hub.tally(route.pattern.source)
        counts.delivered, counts.bytes = 10, 10 * mean_bytes
    return HubStream(route, request(None), hub, StartPlan({}), FilterSet(), time.monotonic())


async def test_a_compressing_route_follows_the_client() -> None:
    route = route_spec(compression=True)
    source = await hub_source(route, None)
    assert stream_encoding(request(b"gzip, deflate, br, zstd"), source, [route]) == BROTLI
    assert stream_encoding(request(b"gzip"), source, [route]) == GZIP
    assert stream_encoding(request(None), source, [route]) is None
    # Off Sluice's own server there is no flow to compress at: plain.
    assert stream_encoding(request(b"br", flow=False), source, [route]) is None


async def test_routes_that_do_not_compress_and_small_events_stay_plain() -> None:
    off = route_spec(path="/off")
    on = route_spec(path="/on", compression=True, compression_min_bytes=200)
    assert stream_encoding(request(b"br"), await hub_source(off, None), [off]) is None
    # A multiplexed stream is compressed only if every member's route is.
    assert stream_encoding(request(b"br"), SimpleNamespace(), [on, off]) is None
    # Under the threshold by what this worker sent so far: plain; unknown yet or over it: compressed.
    assert stream_encoding(request(b"br"), await hub_source(on, 80), [on]) is None
    assert stream_encoding(request(b"br"), await hub_source(on, None), [on]) == BROTLI
    assert stream_encoding(request(b"br"), await hub_source(on, 300), [on]) == BROTLI
