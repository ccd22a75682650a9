"""A multiplexed stream under live reconfiguration: a member the new rules refuse ends alone."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.streams.edge.test_mux_wire import bearer, members
from tests.streams.edge.test_wire import QUIET, WAIT, open_stream
from tests.support.tokens import guard_fields, mint

pytestmark = [
    pytest.mark.services,
    pytest.mark.skipif(
        not os.environ.get("REDIS_URL"),
        reason="the gateway hears configuration changes through a shared channel layer: set REDIS_URL",
    ),
]


async def test_a_member_whose_roles_tighten_ends_alone_and_the_others_go_on(
    gateway_factory: Callable[..., Any], kafka: Any, route: Any
) -> None:
    from guards.services import guard_upsert

    gateway = gateway_factory(SLUICE_ROUTE_CACHE_SECONDS="3600")
    name = f"g-{uuid.uuid4().hex[:8]}"
    guard_upsert(name=name, **guard_fields())
    public, private, tag = kafka.topic(), kafka.topic(), uuid.uuid4().hex[:6]
    route(path=f"/mxl/{tag}/public", topic=public, heartbeat_seconds=QUIET)
    route(path=f"/mxl/{tag}/private", topic=private, guard=name, roles=["read:items"], heartbeat_seconds=QUIET)
    query = members(f"pub:/mxl/{tag}/public", f"priv:/mxl/{tag}/private")
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http,
        open_stream(http, "/streams", params=query, headers=bearer(mint(scope="read:items"))) as stream,
    ):
        await stream.started()
        kafka.produce(private, "for readers")
        await stream.read_data("for readers")
        # The private route now wants a role the token lacks: that member ends, with an event saying so.
        route(path=f"/mxl/{tag}/private", topic=private, guard=name, roles=["read:items", "admin"])
        await stream.read_until(lambda s: any(e.type == "ended" for e in s.events))
        ended = next(e for e in stream.events if e.type == "ended")
        assert json.loads(ended.data) == {"member": "priv", "reason": "unauthorized"}
        kafka.produce(private, "for admins only")
        kafka.produce(public, "for everyone")
        await stream.read_data("for everyone")
    assert [(e.type, e.data) for e in stream.messages if e.type != "ended"] == [
        ("priv", "for readers"),
        ("pub", "for everyone"),
    ]
