"""Configuration reads on the stream-open path: cached, one read at a time, dropped on a change.

While the database is away the last value read stands in, and the read is tried again now and then.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import Any

import pytest
from django.db import OperationalError

from common.database import DatabaseWatch
from streams.core.errors import DatabaseNotAvailable
from streams.selectors import Refreshed, route_table_invalidate, topic_settings_async
from tests.support.polling import condition_wait_async


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


class Clock:
    """``time.monotonic`` of ``streams.selectors``, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr("streams.selectors.time", clock)
    return clock


async def test_a_cached_value_is_read_again_once_stale(cache_seconds: Any, clock: Clock) -> None:
    cache_seconds(10)
    source = Source()
    cached = Refreshed(source.load)
    assert await cached.get() == 1
    clock.now += 9
    assert await cached.get() == 1
    assert source.reads == 1
    clock.now += 2  # stale by less than the cache time: served at once, read again in the background
    source.release.clear()
    assert await cached.get() == 1
    await condition_wait_async(lambda: source.reads == 2, within=10, what="the read in the background")
    assert await cached.get() == 1  # the read is under way: the value is still served
    source.release.set()
    await condition_wait_async(lambda: cached._reading is None, within=10, what="the read done")
    assert await cached.get() == 2
    clock.now += 25  # stale by more than the cache time: the caller waits for the read
    source.release.clear()
    waiting = asyncio.ensure_future(cached.get())
    await condition_wait_async(lambda: source.reads == 3, within=10, what="the read waited for")
    assert not waiting.done()
    source.release.set()
    assert await waiting == 3


async def test_with_no_cache_time_every_open_reads(cache_seconds: Any) -> None:
    cache_seconds(0)
    source = Source()
    cached = Refreshed(source.load)
    assert [await cached.get() for _ in range(3)] == [1, 2, 3]


class FlakySource(Source):
    """A read that fails as a database away does while ``away`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.away = False

    async def load(self) -> int:
        if self.away:
            self.reads += 1
            raise OperationalError("connection refused")
        return await super().load()


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> DatabaseWatch:
    """A fresh process-wide database watch for the test (the selectors report to it)."""
    fresh = DatabaseWatch()
    monkeypatch.setattr("streams.selectors.database_watch", fresh)
    monkeypatch.setattr("streams.selectors.RETRY_SECONDS", 0.05)
    return fresh


async def test_while_the_database_is_away_the_last_value_is_served_and_counted(
    cache_seconds: Any, watch: DatabaseWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_seconds(0)
    monkeypatch.setattr("streams.selectors.RETRY_SECONDS", 60)
    source = FlakySource()
    cached = Refreshed(source.load)
    assert await cached.get() == 1
    source.away = True
    assert await cached.get() == 1  # the read failed: the value read before stands in
    assert watch.away
    reads = source.reads
    assert [await cached.get() for _ in range(50)] == [1] * 50
    assert source.reads == reads  # not asked again within RETRY_SECONDS, however many ask
    assert cached.served_stale == 51
    assert cached.stale_seconds() > 0
    cached.invalidate()  # a configuration change heard meanwhile does not drop the stand-in
    assert await cached.get() == 1


async def test_the_database_is_asked_again_in_the_background_and_its_return_ends_the_outage(
    cache_seconds: Any, watch: DatabaseWatch
) -> None:
    cache_seconds(0)
    source = FlakySource()
    cached = Refreshed(source.load)
    assert await cached.get() == 1
    source.away = True
    await cached.get()
    source.away = False
    await asyncio.sleep(0.06)
    assert await cached.get() == 1  # served at once; the read runs behind it
    await condition_wait_async(lambda: not watch.away, within=5, what="the read behind it")
    assert cached.stale_seconds() == 0
    assert await cached.get() == source.reads  # read again, as every call is with a cache time of 0


async def test_with_nothing_read_yet_a_database_away_is_a_503_asked_again_at_most_every_retry(
    cache_seconds: Any, watch: DatabaseWatch
) -> None:
    cache_seconds(60)
    source = FlakySource()
    source.away = True
    cached = Refreshed(source.load)
    with pytest.raises(DatabaseNotAvailable) as refused:
        await cached.get()
    assert refused.value.status == 503
    assert (b"retry-after", b"5") in refused.value.headers
    assert cached.unknown
    with pytest.raises(DatabaseNotAvailable):
        await cached.get()
    assert source.reads == 1
    source.away = False
    await asyncio.sleep(0.06)
    assert await cached.get() == 2
    assert not cached.unknown


def test_an_outage_is_logged_once_when_it_goes_and_once_when_it_is_back(caplog: pytest.LogCaptureFixture) -> None:
    watch = DatabaseWatch()
    with caplog.at_level(logging.INFO, logger="sluice.database"):
        for _ in range(100):
            watch.failed(OperationalError('connection to server at "127.0.0.1", port 5432 failed\nmore'))
        for _ in range(100):
            watch.answered()
    lines = [record.getMessage() for record in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith('database unavailable (OperationalError: connection to server at "127.0.0.1"')
    assert "more" not in lines[0]
    assert lines[1].startswith("database back after ")
    assert not any(record.exc_info for record in caplog.records)


async def test_topic_settings_read_before_an_outage_outlive_a_reload_during_it(
    cache_seconds: Any, watch: DatabaseWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_seconds(60)
    source = FlakySource()

    async def read(name: str) -> int:
        return await source.load()

    monkeypatch.setattr("streams.selectors._topic_settings_read", read)
    name = f"orders-{uuid.uuid4().hex}"  # an entry of this test's own in the process-wide cache
    assert await topic_settings_async(name) == 1
    source.away = True
    route_table_invalidate()  # a reload asked for while the database is away (the channel layer came back)
    assert await topic_settings_async(name) == 1
    assert watch.away
