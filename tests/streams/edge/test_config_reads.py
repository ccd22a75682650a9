"""Configuration reads on the stream-open path: cached, one read at a time, dropped on a change."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from streams.selectors import Refreshed


class Source:
    """A database read stand-in: counts reads, returns the read's number, can be held open."""

    def __init__(self) -> None:
        self.reads = 0
        self.release = threading.Event()
        self.release.set()

    async def load(self) -> int:
        self.reads += 1
        number = self.reads
        assert await asyncio.to_thread(self.release.wait, 10)
        return number


@pytest.fixture
def cache_seconds(settings: Any) -> Any:
    def set_to(seconds: float) -> None:
        settings.SLUICE = {**settings.SLUICE, "ROUTE_CACHE_SECONDS": seconds}

    return set_to


async def test_a_storm_of_opens_shares_one_read(cache_seconds: Any) -> None:
    cache_seconds(60)
    source = Source()
    cached = Refreshed(source.load)
    source.release.clear()
    waiting = [asyncio.ensure_future(cached.get()) for _ in range(500)]
    await asyncio.sleep(0.05)
    assert not any(task.done() for task in waiting)
    source.release.set()
    assert set(await asyncio.gather(*waiting)) == {1}
    assert await cached.get() == 1
    assert source.reads == 1


async def test_a_change_during_a_read_is_not_hidden_by_it(cache_seconds: Any) -> None:
    cache_seconds(60)
    source = Source()
    cached = Refreshed(source.load)
    source.release.clear()
    before = asyncio.ensure_future(cached.get())
    await asyncio.sleep(0.05)
    cached.invalidate()  # the configuration changed while read 1 was under way
    after = asyncio.ensure_future(cached.get())
    await asyncio.sleep(0.05)
    source.release.set()
    assert await before == 1
    assert await after == 2
    assert await cached.get() == 2  # read 1 was not kept


async def test_a_cached_value_is_read_again_once_stale(cache_seconds: Any) -> None:
    cache_seconds(0.05)
    source = Source()
    cached = Refreshed(source.load)
    assert await cached.get() == 1
    assert await cached.get() == 1
    await asyncio.sleep(0.06)
    assert await cached.get() == 2


async def test_with_no_cache_time_every_open_reads(cache_seconds: Any) -> None:
    cache_seconds(0)
    source = Source()
    cached = Refreshed(source.load)
    assert [await cached.get() for _ in range(3)] == [1, 2, 3]
