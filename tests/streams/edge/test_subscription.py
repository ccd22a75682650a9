"""A subscription notices that the channel layer forgot its groups, joins them again, and says so meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streams.edge.authorization.reauthorization import (
    Deadlines,
    NotPublished,
    ReauthorizationBus,
    StreamDeadline,
    group_name,
)
from streams.edge.authorization.reconfiguration import CONFIG_GROUP, ConfigBus, OpenStreams
from streams.edge.authorization.subscription import NotConfirmed, Subscription
from tests.streams.edge.test_reauthorization import FakeLayer
from tests.support.polling import condition_wait_async


class ForgetfulLayer(FakeLayer):
    """A layer that can restart empty (every group and queued message gone) or be away."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False
        self.back = asyncio.Event()
        self.back.set()

    def outage(self, away: bool) -> None:
        self.away = away
        if away:
            self.back.clear()
        else:
            self.back.set()

    def restart_empty(self) -> None:
        self.groups.clear()
        for queue in self.queues.values():
            while not queue.empty():
                queue.get_nowait()

    def _check(self) -> None:
        if self.away:
            raise ConnectionError("Connection refused")

    async def receive(self, channel: str) -> dict[str, Any]:
        await self.back.wait()
        return await super().receive(channel)

    async def group_add(self, group: str, channel: str) -> None:
        self._check()
        await super().group_add(group, channel)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self._check()
        await super().group_send(group, message)


async def test_a_restart_without_errors_is_noticed_and_the_groups_joined_again() -> None:
    layer = ForgetfulLayer()
    subscription = Subscription(layer)
    rejoined: list[int] = []
    subscription.on_rejoined(lambda: rejoined.append(1))
    await subscription.join("g.one")
    await subscription.start()
    try:
        assert subscription.live() == (True, "")
        await subscription.confirm()
        layer.restart_empty()  # nothing fails: only the missing heartbeat tells
        await condition_wait_async(lambda: rejoined, within=5, what="the groups to be joined again")
        assert layer.groups["g.one"]
        await condition_wait_async(lambda: subscription.live()[0], within=5, what="live again")
        with pytest.raises(NotConfirmed, match="moments ago"):
            await subscription.confirm()  # other instances may not have joined again yet
    finally:
        subscription.stop()


async def test_an_outage_is_reported_by_live_and_confirm_then_healed_within_a_second() -> None:
    layer = ForgetfulLayer()
    subscription = Subscription(layer)
    rejoined: list[float] = []
    loop = asyncio.get_running_loop()
    subscription.on_rejoined(lambda: rejoined.append(loop.time()))
    await subscription.join("g.one")
    await subscription.start()
    try:
        layer.outage(True)
        await condition_wait_async(lambda: not subscription.live()[0], within=5, what="not live")
        with pytest.raises(NotConfirmed):
            await subscription.confirm()
        layer.restart_empty()
        layer.outage(False)
        back = loop.time()
        await condition_wait_async(lambda: rejoined, within=5, what="joined again")
        assert rejoined[0] - back < 1.0
        assert layer.groups["g.one"]
        await condition_wait_async(lambda: subscription.live()[0], within=5, what="live again")
    finally:
        subscription.stop()


async def test_a_config_bus_reloads_after_joining_again() -> None:
    layer = ForgetfulLayer()
    reloads: list[int] = []

    async def reload() -> Any:
        reloads.append(1)
        from streams.core.routes import RouteTable

        return RouteTable(())

    bus = ConfigBus(OpenStreams(), layer, reload)
    await bus.start()
    try:
        assert layer.groups[CONFIG_GROUP]
        layer.restart_empty()
        await condition_wait_async(lambda: reloads, within=5, what="a reload after the rejoin")
        assert layer.groups[CONFIG_GROUP]
    finally:
        bus.stop()


async def test_an_extension_is_refused_until_every_instance_can_have_joined_again() -> None:
    layer = ForgetfulLayer()
    here, there = ReauthorizationBus(Deadlines(), layer), ReauthorizationBus(Deadlines(), layer)
    remote = StreamDeadline(guard="g", identity="alice", roles={"read"}, expires=10**10)
    await there.stream_open(remote)
    try:
        await here.stream_reauthorize(guard="g", identity="alice", roles={"read"}, expires=10**10 + 1)
        await condition_wait_async(lambda: remote.expires == 10**10 + 1, within=5, what="the extension")
        layer.restart_empty()
        await condition_wait_async(
            lambda: layer.groups.get(group_name(("g", "alice"))), within=5, what="the holder to join again"
        )
        with pytest.raises(NotPublished):
            await here.stream_reauthorize(guard="g", identity="alice", roles={"read"}, expires=10**10 + 2)
        await asyncio.sleep(2.2)  # SETTLE_SECONDS
        await here.stream_reauthorize(guard="g", identity="alice", roles={"read"}, expires=10**10 + 3)
        await condition_wait_async(lambda: remote.expires == 10**10 + 3, within=5, what="the later extension")
    finally:
        there.stream_close(remote)
        here.stop()
        there.stop()
