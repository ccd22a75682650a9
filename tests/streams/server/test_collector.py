"""The cycle collector as the gateway sets it before serving."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections.abc import Callable, Iterator

import pytest

from streams.server import collector
from streams.server.collector import (
    FULL_COLLECTION_SECONDS,
    MIDDLE_THRESHOLD,
    OLD_THRESHOLD,
    YOUNG_THRESHOLD,
    collector_settle,
)
from tests.conftest import ROOT


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


def test_the_old_generation_is_collected_on_the_clock_and_the_heap_trimmed(clock: Clock, monkeypatch) -> None:
    trims: list[None] = []
    monkeypatch.setattr(collector, "heap_trim", lambda: trims.append(None))
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
    assert len(trims) == 1
    assert [seconds for seconds, _ in clock.scheduled] == [FULL_COLLECTION_SECONDS]  # and the next one is due


# Run in a fresh process: how much of a free glibc hands back at once depends on the heap's past.
HEAP_SCENARIO = """
import brotli
from streams.server.collector import heap_trim

def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

def compressor():
    made = brotli.Compressor(quality=5, lgwin=16)
    made.process(b"data: warm\\n\\n")
    made.flush()
    return made

compressor()  # glibc serves blocks this size from the heap once one was freed (its mmap threshold rises)
held, pinned = [], []
for _ in range(200):  # some 55 MB, each block between small ones kept alive: none at the heap's top
    held.append(compressor())
    pinned.append(bytearray(4096))
before = rss_mib()
del held
freed = rss_mib()
heap_trim()
print(before, freed, rss_mib())
"""


def test_what_c_libraries_freed_in_the_middle_of_the_heap_goes_back_to_the_system() -> None:
    done = subprocess.run(
        [sys.executable, "-c", HEAP_SCENARIO], capture_output=True, text=True, check=True, cwd=ROOT, timeout=60
    )
    before, freed, trimmed = map(float, done.stdout.split())
    assert freed > before - 20  # freed, and still the process's
    assert trimmed < before - 35


ARENAS_PROBE = """
import os, subprocess, sys
from streams.server.collector import arenas_cap
arenas_cap()
child = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('MALLOC_ARENA_MAX'))"],
                       capture_output=True, text=True, check=True)
print(os.environ.get("MALLOC_ARENA_MAX"), child.stdout.strip())
"""


@pytest.mark.parametrize(("given", "seen"), [(None, "2 2"), ("4", "4 4")])
def test_arenas_are_capped_for_the_worker_and_its_children_unless_the_operator_chose(
    given: str | None, seen: str
) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if given is not None:
        env["MALLOC_ARENA_MAX"] = given
    probe = subprocess.run([sys.executable, "-c", ARENAS_PROBE], capture_output=True, text=True, env=env, check=True)
    assert probe.stdout.strip() == seen
