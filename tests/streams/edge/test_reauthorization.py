"""The pure part of continuous authorization: deadlines, the registry and the bus over a fake layer (SPEC 4.3)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from streams.edge.authorization.reauthorization import (
    CHALLENGE_FRAME,
    Deadlines,
    NotPublished,
    ReauthorizationBus,
    StreamDeadline,
    group_name,
)
from tests.support.polling import condition_wait_async

LATER = time.time() + 3600


def deadline(identity: str = "alice", roles: tuple[str, ...] = ("read",), guard: str = "g") -> StreamDeadline:
    return StreamDeadline(guard=guard, identity=identity, roles=roles, expires=LATER, challenge=60)


def test_challenge_frame_is_exact() -> None:
    assert CHALLENGE_FRAME == (
        b'event: challenge\ndata: {"method":"POST","headers":{"content-type":"application/x-challenge-response"}}\n\n'
    )


def test_group_name_is_valid_for_any_identity() -> None:
    name = group_name(("guard", "ünïcode user@example.com / with spaces" * 10))
    assert len(name) < 100
    assert all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)
    assert name != group_name(("guard", "other"))


async def test_extension_reaches_only_streams_of_that_guard_and_identity_whose_roles_it_grants() -> None:
    registry = Deadlines()
    mine, needs_admin, bobs, other_guard = (
        deadline(),
        deadline(roles=("read", "admin")),
        deadline("bob"),
        deadline(guard="h"),
    )
    for each in (mine, needs_admin, bobs, other_guard):
        registry.add(each)
        each.start(on_challenge=lambda: None, on_expire=lambda: None)
    try:
        assert registry.extend(guard="g", identity="alice", roles={"read", "write"}, expires=LATER + 10) == 1
        assert [d.expires for d in (mine, needs_admin, bobs, other_guard)] == [LATER + 10, LATER, LATER, LATER]
        # An older token never shortens a stream.
        assert registry.extend(guard="g", identity="alice", roles={"read"}, expires=LATER + 5) == 0
        assert mine.expires == LATER + 10
    finally:
        for each in (mine, needs_admin, bobs, other_guard):
            registry.remove(each)
    assert ("g", "alice") not in registry


async def test_timers_fire_challenge_then_expire() -> None:
    fired: list[str] = []
    soon = deadline()
    soon.challenge = 1
    soon.expires = time.time() + 1  # the challenge is due at once, the deadline a second later
    soon.start(on_challenge=lambda: fired.append("challenge"), on_expire=lambda: fired.append("expire"))
    await condition_wait_async(lambda: len(fired) == 2, within=10, what="both timers")
    assert fired == ["challenge", "expire"]


class FakeLayer:
    """Just enough of a channel layer: groups of channels, one queue per channel."""

    def __init__(self) -> None:
        self.groups: dict[str, set[str]] = {}
        self.queues: dict[str, asyncio.Queue[dict[str, Any]]] = {}

    async def new_channel(self, prefix: str = "specific.") -> str:
        name = f"{prefix}{len(self.queues)}"
        self.queues[name] = asyncio.Queue()
        return name

    async def receive(self, channel: str) -> dict[str, Any]:
        return await self.queues[channel].get()

    async def group_add(self, group: str, channel: str) -> None:
        self.groups.setdefault(group, set()).add(channel)

    async def group_discard(self, group: str, channel: str) -> None:
        self.groups.get(group, set()).discard(channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        for channel in self.groups.get(group, ()):
            self.queues[channel].put_nowait(message)


async def test_bus_carries_an_extension_to_another_process_and_leaves_groups_when_streams_close() -> None:
    layer = FakeLayer()
    here, there = ReauthorizationBus(Deadlines(), layer), ReauthorizationBus(Deadlines(), layer)
    remote = deadline()
    await there.stream_open(remote)
    remote.start(on_challenge=lambda: None, on_expire=lambda: None)
    try:
        assert layer.groups[group_name(("g", "alice"))]
        assert await here.stream_reauthorize(guard="g", identity="alice", roles={"read"}, expires=LATER + 30) == 0
        await condition_wait_async(lambda: remote.expires == LATER + 30, within=10, what="the remote extension")
        there.stream_close(remote)
        await condition_wait_async(
            lambda: not layer.groups[group_name(("g", "alice"))], within=10, what="the group to be left"
        )
    finally:
        here.stop()
        there.stop()


class RefusingLayer(FakeLayer):
    """A channel layer that is down for publishing (Redis gone, say)."""

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        raise ConnectionError("channel layer unreachable")


async def test_an_extension_that_cannot_be_published_is_reported_and_applied_nowhere() -> None:
    bus = ReauthorizationBus(Deadlines(), RefusingLayer())
    local = deadline()
    await bus.stream_open(local)
    local.start(on_challenge=lambda: None, on_expire=lambda: None)
    try:
        with pytest.raises(NotPublished, match="unreachable"):
            await bus.stream_reauthorize(guard="g", identity="alice", roles={"read"}, expires=LATER + 30)
        assert local.expires == LATER  # 503: the client tries again; until then no stream counts on the token
    finally:
        bus.stream_close(local)
        bus.stop()
