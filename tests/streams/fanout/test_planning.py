"""Where resumes start when their id does not fit the log: past its end, or before its start."""

from __future__ import annotations

import pytest

from streams.core.ids import EventId, progress_encode
from streams.fanout.planning import PositionError
from tests.streams.fanout.fakes import FakeAccess
from tests.streams.fanout.test_hub import make_hub


def marks(partitions: dict[int, tuple[int, int]]) -> FakeAccess:
    """A cluster whose partitions hold ``[low, high)``."""
    return FakeAccess(partitions, marks=partitions)


def resume(offsets: dict[int, int]) -> EventId:
    from streams.core.ids import event_id_parse

    return event_id_parse(progress_encode(offsets))


async def test_an_id_past_the_end_starts_at_the_end() -> None:
    hub = make_hub(partitions=2, access=marks({0: (0, 5), 1: (0, 5)}))
    hub.next = {0: 5, 1: 5}
    plan = await hub.plan(last=resume({0: 1000, 1: 3}), initial="live", since_ms=None)
    assert plan.positions == {0: 5, 1: 3}
    assert hub.counters.clamped_past_end == 1


async def test_an_id_a_little_ahead_of_this_hub_but_within_the_log_is_kept() -> None:
    hub = make_hub(partitions=1, access=marks({0: (0, 9)}))  # another instance has read up to 9 already
    hub.next = {0: 5}
    plan = await hub.plan(last=resume({0: 8}), initial="live", since_ms=None)
    assert plan.positions == {0: 8}
    assert hub.counters.clamped_past_end == 0


async def test_offsets_retention_removed_start_at_the_log_start_and_count_the_gap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = make_hub(partitions=2, access=marks({0: (30, 50), 1: (0, 50)}))
    hub.next = {0: 50, 1: 50}
    hub.cache.reset({0: 40, 1: 40})
    plan = await hub.plan(last=resume({0: 12, 1: 20}), initial="live", since_ms=None)
    assert plan.positions == {0: 30, 1: 20}
    assert hub.counters.gap_records == 18
    assert "offset 12 is gone (the log starts at 30): 18 records skipped" in caplog.text


async def test_an_id_naming_a_partition_the_topic_lacks_is_refused() -> None:
    hub = make_hub(partitions=1)
    with pytest.raises(PositionError, match="names partition 3"):
        await hub.plan(last=resume({3: 1}), initial="live", since_ms=None)
