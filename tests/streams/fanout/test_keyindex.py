"""The cache's index by key: in step with the cache through appends, evictions, compaction and restarts."""

from __future__ import annotations

import random

import pytest

from streams.core.records import Record
from streams.fanout.cache import CacheLimits, PartitionCache, TopicCache
from streams.fanout.keyindex import KeyIndex


def keyed(partition: int, offset: int, key: bytes | None, problem: bool = False) -> Record:
    return Record(partition, offset, 1000 + offset, key, b"v", problem="bad bytes" if problem else None)


def expected_runs(cache: PartitionCache) -> dict[bytes | None, list[Record]]:
    """The cache's records by key, as the index should hold them (the undecodable ones under None)."""
    runs: dict[bytes | None, list[Record]] = {}
    for record in cache:
        if record.problem is not None:
            runs.setdefault(None, []).append(record)
        elif record.match_key is not None:
            runs.setdefault(record.match_key, []).append(record)
    return runs


def assert_in_step(cache: TopicCache) -> None:
    for partition in cache.partitions.values():
        assert partition.keys.runs() == expected_runs(partition)
        assert len(partition.keys) == sum(len(run) for run in expected_runs(partition).values())


def random_record(rng: random.Random, partition: int, offset: int) -> Record:
    """Keys of every kind: a hot key, a few warm ones, distinct ones, none, and undecodable records."""
    roll = rng.random()
    if roll < 0.3:
        key: bytes | None = b"hot"
    elif roll < 0.6:
        key = b"warm%d" % rng.randrange(5)
    elif roll < 0.8:
        key = b"only%d:%d" % (partition, offset)
    else:
        key = None
    return keyed(partition, offset, key, problem=rng.random() < 0.05)


@pytest.mark.parametrize("limit", [1, 7, 300])
def test_the_index_follows_appends_and_evictions_through_compaction(limit: int) -> None:
    rng = random.Random(limit)
    cache = TopicCache(CacheLimits(max_messages=limit))
    cache.reset({0: 0, 1: 0})
    offsets = {0: 0, 1: 0}
    for n in range(5000):  # far past the cache's size: both storages compact many times
        p = rng.randrange(2)
        cache.append(random_record(rng, p, offsets[p]))
        offsets[p] += 1
        cache.evict()
        if n % 97 == 0 or n > 4900:
            assert_in_step(cache)
    assert cache.records == limit
    assert_in_step(cache)


def test_the_index_follows_evictions_by_age_and_a_restart() -> None:
    cache = TopicCache(CacheLimits(max_age_seconds=1.0))
    cache.reset({0: 0})
    for offset in range(3000):
        cache.append(keyed(0, offset, b"k%d" % (offset % 3), problem=offset % 11 == 0))
    cache.evict_expired(now_ms=1000 + 2000 + 1000)  # keeps offsets 2000 and after
    assert cache[0].start == 2000
    assert_in_step(cache)
    cache.partition_restart(0, 0)
    assert cache[0].keys.runs() == {}
    cache.append(keyed(0, 0, b"k1"))
    assert_in_step(cache)


def test_a_key_with_one_record_and_then_more_and_then_one_again() -> None:
    index = KeyIndex()
    first, second, third = keyed(0, 0, b"a"), keyed(0, 1, b"a"), keyed(0, 2, b"a")
    index.add(first)
    assert index.runs() == {b"a": [first]}
    index.add(second)
    index.add(third)
    assert index.runs() == {b"a": [first, second, third]}
    index.remove(first)
    index.remove(second)
    assert index.runs() == {b"a": [third]}
    assert index.picks([b"a"], 2, 10) == [third]
    assert index.picks([b"a"], 3, 10) == []
    index.remove(third)
    assert index.runs() == {}
    assert len(index) == 0


def test_picks_are_the_keys_and_undecodable_records_from_every_offset() -> None:
    rng = random.Random(5)
    cache = TopicCache(CacheLimits(max_messages=400))
    cache.reset({0: 0})
    for offset in range(1500):
        cache.append(random_record(rng, 0, offset))
        cache.evict()
    partition = cache[0]
    for keys in ([b"hot"], [b"warm1", b"warm3"], [b"only0:1450", b"absent"], [b"absent"]):
        for offset in range(partition.start, 1501):
            wanted = [r for r in partition if r.offset >= offset and (r.problem is not None or r.match_key in keys)]
            for limit in (1, 3, 1000):
                assert partition.keys.picks(keys, offset, limit) == wanted[:limit]


def test_count_between() -> None:
    cache = PartitionCache(0, 0)
    for offset in (0, 1, 5, 6, 9):  # gaps, as compaction leaves them
        cache.append(keyed(0, offset, b"k"))
    cache.evict_oldest()
    assert cache.count_between(1) == 4
    assert cache.count_between(2) == 3
    assert cache.count_between(1, 6) == 2
    assert cache.count_between(2, 7) == 2
    assert cache.count_between(10) == 0
