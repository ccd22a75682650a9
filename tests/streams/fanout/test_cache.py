"""The per-partition record cache, and the hub keeping its caches within the topic's limits."""

from __future__ import annotations

import pytest

from streams.core.ids import progress_encode
from streams.core.records import Record
from streams.fanout.cache import CacheLimits, PartitionCache
from streams.fanout.hub import TopicHub
from tests.streams.fanout.test_hub import make_hub


def record(offset: int, timestamp: int | None = None, partition: int = 0, value: bytes = b"v") -> Record:
    return Record(partition, offset, 1000 + offset if timestamp is None else timestamp, None, value)


def filled(offsets: list[int], start: int | None = None) -> PartitionCache:
    cache = PartitionCache(0, offsets[0] if start is None else start)
    for offset in offsets:
        cache.append(record(offset))
    return cache


def test_empty_cache() -> None:
    cache = PartitionCache(3, 17)
    assert cache.partition == 3
    assert len(cache) == 0
    assert cache.bytes == 0
    assert cache.oldest() is None
    assert list(cache) == []
    assert cache.covers(17)
    assert cache.covers(100)
    assert not cache.covers(16)
    assert cache.records_from(17, 10) == []
    assert cache.first_at_or_after(0) is None


def test_append_counts_records_and_bytes() -> None:
    cache = filled([0, 1, 2])
    assert len(cache) == 3
    assert cache.bytes == sum(r.size for r in cache)
    assert cache.oldest().offset == 0  # type: ignore[union-attr]
    assert [r.offset for r in cache] == [0, 1, 2]


def test_evict_oldest_moves_start() -> None:
    cache = filled([0, 1, 2])
    size = cache.bytes
    evicted = cache.evict_oldest()
    assert evicted.offset == 0
    assert cache.start == 1
    assert len(cache) == 2
    assert cache.bytes == size - evicted.size
    assert not cache.covers(0)
    assert cache.covers(1)
    assert [r.offset for r in cache] == [1, 2]


def test_records_from_and_limit() -> None:
    cache = filled(list(range(10)))
    assert [r.offset for r in cache.records_from(0, 100)] == list(range(10))
    assert [r.offset for r in cache.records_from(4, 3)] == [4, 5, 6]
    assert [r.offset for r in cache.records_from(9, 3)] == [9]
    assert cache.records_from(10, 3) == []


def test_records_from_over_gaps() -> None:
    # Compacted topics and transaction markers leave holes in the offsets.
    cache = filled([5, 6, 9, 12], start=3)
    assert [r.offset for r in cache.records_from(3, 10)] == [5, 6, 9, 12]
    assert [r.offset for r in cache.records_from(7, 10)] == [9, 12]
    assert [r.offset for r in cache.records_from(10, 1)] == [12]
    assert cache.records_from(13, 10) == []


def test_records_from_after_eviction() -> None:
    cache = filled(list(range(10)))
    for _ in range(4):
        cache.evict_oldest()
    assert cache.start == 4
    assert [r.offset for r in cache.records_from(4, 100)] == list(range(4, 10))
    assert [r.offset for r in cache.records_from(6, 2)] == [6, 7]


def test_storage_is_compacted_after_many_evictions() -> None:
    cache = filled(list(range(3000)))
    for _ in range(2000):
        cache.evict_oldest()
    assert len(cache._records) < 3000  # the evicted slots were given back
    assert len(cache) == 1000
    assert cache.start == 2000
    assert cache.oldest().offset == 2000  # type: ignore[union-attr]
    assert [r.offset for r in cache.records_from(2500, 3)] == [2500, 2501, 2502]
    cache.append(record(3000))
    assert [r.offset for r in cache.records_from(2999, 5)] == [2999, 3000]
    assert None not in list(cache)


def test_first_at_or_after() -> None:
    cache = PartitionCache(0, 0)
    for offset, ts in [(0, 100), (1, 200), (2, 200), (3, 300)]:
        cache.append(record(offset, ts))
    assert cache.first_at_or_after(50).offset == 0  # type: ignore[union-attr]
    assert cache.first_at_or_after(150).offset == 1  # type: ignore[union-attr]
    assert cache.first_at_or_after(200).offset == 1  # type: ignore[union-attr]
    assert cache.first_at_or_after(300).offset == 3  # type: ignore[union-attr]
    assert cache.first_at_or_after(301) is None
    cache.evict_oldest()
    assert cache.first_at_or_after(50).offset == 1  # type: ignore[union-attr]


def test_default_limits() -> None:
    assert CacheLimits() == CacheLimits(max_messages=10_000, max_bytes=16 * 1024 * 1024, max_age_seconds=3600.0)


# -- the hub's eviction policy -----------------------------------------------------


def hub_with(limits: CacheLimits, partitions: int = 2) -> TopicHub:
    return make_hub(partitions, limits)


def ingest(hub: TopicHub, records: list[Record]) -> None:
    hub.ingest(list(records))


def cached(hub: TopicHub) -> dict[int, list[int]]:
    return {p: [r.offset for r in cache] for p, cache in hub.cache.partitions.items()}


async def test_hub_evicts_oldest_by_time_across_partitions() -> None:
    hub = hub_with(CacheLimits(max_messages=3))
    ingest(hub, [record(0, 10, 0), record(0, 20, 1), record(1, 30, 0), record(1, 40, 1)])
    assert cached(hub) == {0: [1], 1: [0, 1]}
    assert hub.cache.records == 3
    assert hub.cache[0].start == 1
    assert hub.cache[1].start == 0
    ingest(hub, [record(2, 50, 1)])
    assert cached(hub) == {0: [1], 1: [1, 2]}
    assert hub.next == {0: 2, 1: 3}


async def test_one_batch_evicts_across_partitions_in_time_order() -> None:
    hub = hub_with(CacheLimits(max_messages=3), partitions=3)
    # Partition 1 holds the oldest two, then 0 and 2 alternate; partition 1 empties on the way.
    times = {(1, 0): 5, (1, 1): 6, (0, 0): 10, (2, 0): 11, (0, 1): 12, (2, 1): 13, (0, 2): 14}
    ingest(hub, [record(offset, ts, partition) for (partition, offset), ts in times.items()])
    assert cached(hub) == {0: [1, 2], 1: [], 2: [1]}
    assert hub.cache.records == 3
    assert [hub.cache[p].start for p in range(3)] == [1, 2, 1]
    assert hub.state.progress.token == progress_encode({0: 3, 1: 2, 2: 2})


async def test_hub_evicts_by_bytes() -> None:
    one = record(0).size
    hub = hub_with(CacheLimits(max_bytes=2 * one), partitions=1)
    ingest(hub, [record(i) for i in range(5)])
    assert cached(hub) == {0: [3, 4]}
    assert hub.cache.bytes == 2 * one == hub.cache[0].bytes


async def test_hub_evicts_a_record_bigger_than_the_limit() -> None:
    hub = hub_with(CacheLimits(max_bytes=1024), partitions=1)
    ingest(hub, [record(0), record(1, value=b"x" * 2048)])
    assert cached(hub) == {0: []}
    assert hub.cache.records == 0
    assert hub.cache.bytes == 0
    assert hub.cache[0].start == 2
    assert hub.next == {0: 2}


async def test_hub_evicts_expired_records() -> None:
    hub = hub_with(CacheLimits(max_age_seconds=10))
    ingest(hub, [record(0, 1_000, 0), record(0, 5_000, 1), record(1, 12_000, 0), record(1, 20_000, 1)])
    hub.cache.evict_expired(now_ms=16_000)  # cut-off 6 000
    assert cached(hub) == {0: [1], 1: [1]}
    assert hub.cache.records == 2
    assert hub.cache.bytes == sum(c.bytes for c in hub.cache.partitions.values())
    hub.cache.evict_expired(now_ms=100_000)
    assert cached(hub) == {0: [], 1: []}
    assert hub.cache.records == 0
    assert hub.cache.bytes == 0
    assert (hub.cache[0].start, hub.cache[1].start) == (2, 2)


async def test_hub_ignores_records_it_already_has() -> None:
    hub = hub_with(CacheLimits(), partitions=1)
    ingest(hub, [record(0), record(1)])
    ingest(hub, [record(1), record(2)])
    assert cached(hub) == {0: [0, 1, 2]}
    assert hub.counters.records_in == 3


@pytest.mark.parametrize("limit", [1, 2, 7])
async def test_hub_never_holds_more_than_max_messages(limit: int) -> None:
    hub = hub_with(CacheLimits(max_messages=limit), partitions=3)
    for i in range(20):
        ingest(hub, [record(i, 100 + i * 3 + p, p) for p in range(3)])
        assert hub.cache.records == sum(len(c) for c in hub.cache.partitions.values()) <= limit
