"""Opening and closing streams leaves nothing for the cycle collector.

The gateway collects its old generation every 300 s only (``streams/server/collector.py``). Two
cycles made per stream once waited for it, and a 3-minute soak grew 15 MiB/min (docs/reliability.md,
"A long run"): each stream's Twisted request and its ``RequestFlow`` (the request kept the flow as
its producer after the client left), and every route of every route table read (a prefetched route
and the queryset of its filters). Each test fails on the cycle it names.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import QuerySet
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.web import http

from guards.services import guard_upsert
from streams.models import Route, RouteFilter
from streams.route_tables import route_table_build
from streams.server.flow import RequestFlow
from streams.services import route_upsert
from tests.support.garbage import cyclic_garbage, of_types
from tests.support.tokens import guard_fields

STREAMS = 50


def connection_lost(channel: http.HTTPChannel, transport: StringTransport, why: str) -> None:
    """As Twisted's TCP transport ends: it lets its producer (the channel) go, then tells the channel."""
    transport.producer = None
    channel.connectionLost(Failure(ConnectionError(why)))


def stream_served(gone: bool) -> None:
    """A stream's life on a real HTTPChannel: head and events through its flow, then its end as the app ends it."""
    channel = http.HTTPChannel()
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 40000))
    channel.makeConnection(transport)
    channel.dataReceived(b"GET /s HTTP/1.1\r\nHost: h\r\n\r\n")
    request: Any = channel.requests[-1]
    request.setResponseCode(200)
    flow = RequestFlow(request)
    for n in range(3):
        flow.write(b"data: %d\n\n" % n)
    if gone:
        connection_lost(channel, transport, "client left")
    flow.release()
    flow.finish()
    if not gone:
        connection_lost(channel, transport, "closed after the response")


@pytest.mark.parametrize("gone", [True, False], ids=["client-left", "response-finished"])
def test_a_stream_leaves_no_cycle_of_its_request_and_flow(gone: bool) -> None:
    with cyclic_garbage() as garbage:
        for _ in range(STREAMS):
            stream_served(gone)
    assert of_types(garbage, http.Request, RequestFlow) == []


@pytest.mark.django_db
def test_a_route_table_read_leaves_no_cycle_of_its_routes() -> None:
    guard_upsert(name="main", **guard_fields())
    for n in range(10):
        route_upsert(path=f"/s/{n}", topic="t", filters=[{"key": f"k{n}"}, {"headers": {"h": "v"}}])
        route_upsert(path=f"/g/{n}", topic="t", guard="main", filters=[{"key": f"k{n}"}])
    with cyclic_garbage() as garbage:
        for _ in range(5):
            table = route_table_build()
    assert len(table.routes) == 20
    found = table.match("/s/3")
    assert found is not None
    assert [(f.key is not None, len(f.headers)) for f in found[0].filters] == [(True, 0), (False, 1)]
    assert of_types(garbage, Route, RouteFilter, QuerySet) == []
