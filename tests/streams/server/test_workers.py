"""``runstreams --workers 2``: two processes on one port, each with its own hub; a dead one is replaced."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import Gateway
from tests.support.polling import condition_wait
from tests.support.sse_client import EventParser

pytestmark = pytest.mark.slow


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


async def receive_one(client: httpx.AsyncClient, path: str, produced: asyncio.Event) -> str:
    parser = EventParser()
    async with client.stream("GET", path) as response:
        assert response.status_code == 200
        chunks = response.aiter_raw()
        parser.feed(await anext(chunks))
        produced.set()
        while True:
            for event in parser.feed(await anext(chunks)):
                if event.has_data:
                    return event.data


@pytest.fixture
def two_workers(gateway_factory: Callable[..., Gateway]) -> Gateway:
    """``runstreams --workers 2``: a supervisor and two worker processes on one port."""
    return gateway_factory("--workers", "2")


async def test_two_workers_share_the_port_and_a_dead_one_is_replaced(two_workers: Gateway, kafka, route) -> None:
    assert two_workers.process is not None
    supervisor = two_workers.process.pid
    workers = condition_wait(
        lambda: len(children_of(supervisor)) == 2 and children_of(supervisor), within=20.0, what="two workers"
    )
    topic = kafka.topic(partitions=2)
    route(path="/w/{topic}", topic="${params.topic}")

    async def round_trip(n: int, value: str) -> list[str]:
        started = [asyncio.Event() for _ in range(n)]
        async with httpx.AsyncClient(base_url=two_workers.url, timeout=20, limits=httpx.Limits(max_connections=n)) as c:
            tasks = [asyncio.create_task(receive_one(c, f"/w/{topic}", started[i])) for i in range(n)]
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in started)), timeout=30)
            kafka.produce(topic, value, partition=1)
            return await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)

    assert await round_trip(8, "first") == ["first"] * 8

    victim = min(workers)
    os.kill(victim, signal.SIGKILL)
    replaced = condition_wait(
        lambda: len(children_of(supervisor)) == 2 and victim not in children_of(supervisor) and children_of(supervisor),
        within=20.0,
        what="a replacement worker",
    )
    assert victim not in replaced
    # The replacement needs a moment to listen; streams keep being served meanwhile by the other.
    assert await round_trip(8, "second") == ["second"] * 8


def test_workers_default_is_one_per_core_with_a_shared_layer_else_one(monkeypatch, settings) -> None:
    from streams.server import workers as runstreams

    monkeypatch.setattr(runstreams.os, "cpu_count", lambda: 4)
    assert runstreams.workers_default(tls=False, child=False, shared_layer=True) == 4
    assert runstreams.workers_default(tls=True, child=False, shared_layer=True) == 1
    assert runstreams.workers_default(tls=False, child=True, shared_layer=True) == 1
    # Without Redis a challenge response could land on a worker that does not hold the stream.
    assert runstreams.workers_default(tls=False, child=False, shared_layer=False) == 1
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert not runstreams.channel_layer_shared()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
    assert runstreams.channel_layer_shared()
