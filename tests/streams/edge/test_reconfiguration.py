"""Live reconfiguration, in process: open streams held against a new route table, and the listener."""

from __future__ import annotations

import asyncio
from typing import Any

from guards.policy import policy_compile
from streams.core.routes import RouteSpec, RouteTable
from streams.edge.authorization.reconfiguration import CONFIG_GROUP, MESSAGE_TYPE, ConfigBus, OpenStream, OpenStreams
from tests.streams.edge.test_reauthorization import FakeLayer
from tests.support.polling import condition_wait_async
from tests.support.route_specs import route_spec
from tests.support.tokens import SECRET, guard_fields, mint_hs256


def spec(route_id: int = 1, **fields: Any) -> RouteSpec:
    return route_spec(route_id, f"/r{route_id}", **fields)


def guarded(route_id: int = 1, revision: str = "1@a", roles: tuple[str, ...] = ("read:items",), **policy: Any):
    fields = {**guard_fields(), "algorithms": ["HS256"], "keys": [], "secret": SECRET, **policy}
    return spec(route_id, guard=policy_compile(name="g", **fields), guard_revision=revision, roles=roles)


class Ended:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def __call__(self, reason: str) -> None:
        self.reasons.append(reason)


def open_stream(route: RouteSpec, token: str | None = None) -> tuple[OpenStream, Ended]:
    ended = Ended()
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    scope = {"type": "http", "path": route.pattern.source, "headers": headers, "client": ("127.0.0.1", 9)}
    return OpenStream(route, scope, {}, ended), ended


async def test_streams_of_removed_routes_end_and_the_others_take_the_new_spec() -> None:
    streams = OpenStreams()
    kept, kept_ended = open_stream(spec(1))
    gone, gone_ended = open_stream(spec(2))
    streams.add(kept)
    streams.add(gone)
    new_one = spec(1, retry_ms=5000)
    assert await streams.reconcile(RouteTable((new_one,))) == 1
    assert gone_ended.reasons == ["route_removed"]
    assert kept_ended.reasons == []
    assert kept.route is new_one


async def test_a_tightened_guard_re_admits_with_the_credentials_the_stream_opened_with() -> None:
    streams = OpenStreams()
    reader, reader_ended = open_stream(guarded(), mint_hs256(scope="read:items"))
    admin, admin_ended = open_stream(guarded(), mint_hs256(scope="read:items admin"))
    streams.add(reader)
    streams.add(admin)
    tightened = guarded(roles=("read:items", "admin"))
    assert await streams.reconcile(RouteTable((tightened,))) == 1
    assert reader_ended.reasons == ["unauthorized"]
    assert admin_ended.reasons == []


async def test_a_public_route_that_gets_a_guard_ends_streams_without_a_token() -> None:
    streams = OpenStreams()
    anonymous, ended = open_stream(spec(1))
    streams.add(anonymous)
    assert await streams.reconcile(RouteTable((guarded(1),))) == 1
    assert ended.reasons == ["unauthorized"]


async def test_a_guard_whose_issuer_changed_refuses_old_tokens() -> None:
    streams = OpenStreams()
    stream, ended = open_stream(guarded(revision="1@a"), mint_hs256(scope="read:items"))
    streams.add(stream)
    # Same roles, same revision: nothing to check again.
    assert await streams.reconcile(RouteTable((guarded(revision="1@a"),))) == 0
    assert await streams.reconcile(RouteTable((guarded(revision="1@b", issuer="https://elsewhere"),))) == 1
    assert ended.reasons == ["unauthorized"]


async def test_removed_streams_are_forgotten() -> None:
    streams = OpenStreams()
    stream, ended = open_stream(spec(1))
    streams.add(stream)
    streams.remove(stream)
    assert len(streams) == 0
    assert await streams.reconcile(RouteTable(())) == 0
    assert ended.reasons == []


async def test_the_bus_reloads_on_a_broadcast_and_coalesces_bursts() -> None:
    layer = FakeLayer()
    reloads: list[int] = []
    table = RouteTable((spec(1),))

    async def reload() -> RouteTable:
        reloads.append(len(reloads))
        await asyncio.sleep(0)  # a real reload awaits the database
        return table

    streams = OpenStreams()
    stream, ended = open_stream(spec(1))
    streams.add(stream)
    bus = ConfigBus(streams, layer, reload)
    await bus.start()
    await bus.start()  # idempotent: one listener
    try:
        assert len(layer.groups[CONFIG_GROUP]) == 1
        for _ in range(20):
            await layer.group_send(CONFIG_GROUP, {"type": MESSAGE_TYPE})
        await condition_wait_async(lambda: len(reloads) >= 1, within=10, what="a reload")
        assert len(reloads) <= 3  # twenty messages in a burst, a few reloads
        table = RouteTable(())
        await layer.group_send(CONFIG_GROUP, {"type": MESSAGE_TYPE})
        await condition_wait_async(lambda: ended.reasons == ["route_removed"], within=10, what="the stream to end")
    finally:
        bus.stop()
