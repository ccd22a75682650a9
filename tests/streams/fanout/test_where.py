"""Value filters in the hub: live (once per record per distinct filter), catch-up, snapshot and progress."""

from __future__ import annotations

import asyncio
import json
import time
from unittest import mock

from streams.core.filters import FilterSet, MessageFilter
from streams.core.ids import progress_decode
from streams.core.records import Record
from streams.core.templating import ExpansionContext
from streams.core.where import Where, where_resolve, where_template
from streams.fanout.catchup import CatchUp
from streams.fanout.catchup_reads import BacklogSession
from streams.fanout.planning import StartPlan
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from tests.streams.fanout.fakes import FakeAccess
from tests.streams.fanout.test_catchup import Control, state_at
from tests.streams.fanout.test_hub import FakeSink, feed, make_hub


def where(expression: str, **params: str) -> Where:
    compiled = where_resolve(where_template(expression), ExpansionContext(params), None)
    assert compiled is not None
    return compiled


def goal(partition: int, offset: int, goals: int, key: bytes = b"m") -> Record:
    value = json.dumps({"match": {"goals": goals}, "n": offset}).encode()
    return Record(partition, offset, int(time.time() * 1000), key, value)


def data(sink: FakeSink) -> list[int]:
    return [json.loads(e.data)["n"] for e in sink.events() if e.has_data]


async def test_streams_sharing_a_filter_share_one_evaluation_per_record() -> None:
    hub = make_hub()
    sinks = [FakeSink() for _ in range(5)]
    filters = [where("value.match.goals > ${params.min}", min="2"), where("value.match.goals > ${params.min}", min="0")]
    for index, sink in enumerate(sinks):
        hub.subscribe(
            Subscriber(sink, SubscriberOptions(FilterSet((), filters[index % 2]))), StartPlan(dict(hub.next)), 0
        )
    assert len(hub.live.wheres.by_where) == 2
    calls: list[Where] = []
    originals = {f: f.test for f in filters}
    for f in filters:
        object.__setattr__(f, "test", mock.Mock(side_effect=lambda s, f=f: calls.append(f) or originals[f](s)))
    try:
        feed(hub, goal(0, 0, 1), goal(1, 0, 3), goal(0, 1, 5))
    finally:
        for f in filters:
            object.__setattr__(f, "test", originals[f])
    assert len(calls) == 6  # 3 records x 2 distinct filters, whatever the number of streams
    assert [data(s) for s in sinks] == [[0, 1], [0, 0, 1], [0, 1], [0, 0, 1], [0, 1]]


async def test_a_where_filter_with_a_key_filter_needs_both_and_leaves_the_live_set_clean() -> None:
    hub = make_hub()
    sink = FakeSink()
    sub = Subscriber(sink, SubscriberOptions(FilterSet((MessageFilter(key=b"a"),), where("value.match.goals >= 1"))))
    hub.subscribe(sub, StartPlan(dict(hub.next)), 0)
    feed(hub, goal(0, 0, 1, b"a"), goal(0, 1, 1, b"b"), goal(0, 2, 0, b"a"), goal(0, 3, 2, b"a"))
    assert data(sink) == [0, 3]
    hub.unsubscribe(sub)
    assert not hub.live.wheres.by_where
    assert not hub.live.filtered


async def test_progress_moves_past_records_the_filter_rejects() -> None:
    hub = make_hub()
    sink = FakeSink()
    hub.subscribe(
        Subscriber(sink, SubscriberOptions(FilterSet((), where("value.match.goals > 2")), heartbeat_seconds=0)),
        StartPlan(dict(hub.next)),
        0,
    )
    feed(hub, goal(0, 0, 3), goal(1, 0, 0), goal(1, 1, 1))
    events = [e for e in sink.events() if e.has_data]
    assert progress_decode(events[0].id) == {0: 1, 1: 0}
    hub.heartbeat(time.monotonic() + 1)
    assert progress_decode(sink.events()[-1].id) == {0: 1, 1: 2}


async def run_catch_up(log: dict[int, list[Record]], filters: FilterSet, snapshot: bool) -> FakeSink:
    access = FakeAccess(partitions=sorted(log), log=log)
    state = state_at({p: len(records) for p, records in log.items()})
    sink, control = FakeSink(), Control()
    sub = Subscriber(sink, SubscriberOptions(filters))
    sub.positions = dict.fromkeys(log, 0)
    reads = BacklogSession(state.topic, access, access, Record.from_kafka)
    await asyncio.wait_for(CatchUp(state, control, sub, reads).run(snapshot), timeout=5)
    assert control.live == [sub]
    return sink


async def test_a_catch_up_sends_only_matching_records_and_its_last_id_is_past_the_rest() -> None:
    log = {0: [goal(0, o, o % 3) for o in range(9)]}
    sink = await run_catch_up(log, FilterSet((), where("value.match.goals == 2")), snapshot=False)
    assert data(sink) == [2, 5, 8]
    sink = await run_catch_up(log, FilterSet((), where("value.match.goals == 1")), snapshot=False)
    assert data(sink) == [1, 4, 7]


async def test_a_snapshot_gives_the_current_matching_state_per_key() -> None:
    log = {
        0: [
            goal(0, 0, 3, b"a"),  # a matched, then no longer: a's current state does not match
            goal(0, 1, 1, b"b"),
            goal(0, 2, 0, b"a"),
            goal(0, 3, 4, b"b"),  # b's current state matches
            goal(0, 4, 5, b"c"),
        ]
    }
    sink = await run_catch_up(log, FilterSet((), where("value.match.goals > 2")), snapshot=True)
    assert data(sink) == [3, 4]
    assert progress_decode(sink.events()[-1].id) == {0: 5}


async def test_filters_with_an_equality_are_asked_only_for_records_with_that_value() -> None:
    hub = make_hub()
    teams = [where("value.match.team == ${params.team} and value.match.goals > 0", team=f"t{n}") for n in range(50)]
    teams.append(where('value.match.team == "t7" and value.match.goals > 3'))  # t7 again, another filter
    sinks = [FakeSink() for _ in teams]
    for sink, team in zip(sinks, teams, strict=True):
        hub.subscribe(Subscriber(sink, SubscriberOptions(FilterSet((), team))), StartPlan(dict(hub.next)), 0)
    asked: list[Where] = []
    originals = {f: f.test for f in teams}
    for f in teams:
        object.__setattr__(f, "test", lambda s, f=f: asked.append(f) or originals[f](s))
    try:
        record = Record(0, 0, int(time.time() * 1000), b"k", b'{"match":{"team":"t7","goals":2},"n":0}')
        feed(hub, record)
    finally:
        for f in teams:
            object.__setattr__(f, "test", originals[f])
    assert set(asked) == {teams[7], teams[50]}
    assert len(asked) == 2
    assert [n for n, sink in enumerate(sinks) if data(sink)] == [7]
    # A number in the record finds a placeholder's text ("t7" no, "3" yes).
    three = where("value.match.team == ${params.team}", team="3")
    assert three.index is not None
    assert ("n", 3) in three.index[1]
    for sub in list(hub.live):
        hub.unsubscribe(sub)
    assert not hub.live.wheres.indexed
    assert not hub.live.wheres.getters
