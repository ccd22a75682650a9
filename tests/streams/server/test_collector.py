"""The cycle collector as the gateway sets it before serving."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator

import brotli
import pytest

from streams.server.collector import (
    FULL_COLLECTION_SECONDS,
    MIDDLE_THRESHOLD,
    OLD_THRESHOLD,
    YOUNG_THRESHOLD,
    collector_settle,
)


class Clock:
    """Records what is scheduled instead of running it."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[float, Callable[[], object]]] = []

    def call_later(self, seconds: float, function: Callable[[], object]) -> None:
        self.scheduled.append((seconds, function))


@pytest.fixture
def clock() -> Iterator[Clock]:
    thresholds = gc.get_threshold()
    yield Clock()
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class Node:
    """An object in a reference cycle with itself."""

    def __init__(self) -> None:
        self.self = self


def test_the_startup_heap_is_frozen_and_the_old_generation_left_to_the_clock(clock: Clock) -> None:
    gc.unfreeze()
    collector_settle(clock.call_later)
    assert gc.get_freeze_count() > 10_000  # the modules and objects loaded so far
    assert gc.get_threshold() == (YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
    assert OLD_THRESHOLD >= 100_000  # CPython never starts a full collection itself


def test_the_old_generation_is_collected_on_the_clock(clock: Clock) -> None:
    collector_settle(clock.call_later)
    assert [seconds for seconds, _ in clock.scheduled] == [FULL_COLLECTION_SECONDS]
    node = Node()
    gc.collect(1)  # it lives through young and middle collections: now in the old generation
    alive = weakref.ref(node)
    del node
    gc.collect(1)
    assert alive() is not None  # garbage there, which only a full collection looks at
    _, full = clock.scheduled.pop()
    full()
    assert alive() is None
    assert [seconds for seconds, _ in clock.scheduled] == [FULL_COLLECTION_SECONDS]  # and the next one is due


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def test_what_c_libraries_freed_in_the_middle_of_the_heap_goes_back_to_the_system(clock: Clock) -> None:
    def compressor() -> brotli.Compressor:
        made = brotli.Compressor(quality=5, lgwin=16)
        made.process(b"data: warm\n\n")
        made.flush()
        return made

    compressor()  # glibc serves blocks this size from the heap once one was freed (its mmap threshold rises)
    held, pinned = [], []
    for _ in range(200):  # some 55 MB, each block between small ones kept alive: none at the heap's top
        held.append(compressor())
        pinned.append(bytearray(4096))
    before = rss_mib()
    del held
    assert rss_mib() > before - 20  # freed, and still the process's
    collector_settle(clock.call_later)
    _, full = clock.scheduled.pop()
    full()
    assert rss_mib() < before - 35
    del pinned
