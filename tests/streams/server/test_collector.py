"""The cycle collector as the gateway sets it before serving."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from streams.server.collector import YOUNG_THRESHOLD, collector_settle


@pytest.fixture
def collector_restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector_restored")
def test_the_startup_heap_is_frozen_and_young_collections_spaced_out() -> None:
    gc.unfreeze()
    collector_settle()
    assert gc.get_freeze_count() > 10_000  # the modules and objects loaded so far
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD


@pytest.mark.usefixtures("collector_restored")
def test_cycles_made_after_it_are_still_collected() -> None:
    collector_settle()

    class Node:
        pass

    node = Node()
    node.self = node  # type: ignore[attr-defined]
    alive = weakref.ref(node)
    del node
    gc.collect()
    assert alive() is None
