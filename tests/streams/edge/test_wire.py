"""The wire, end to end: a real gateway (``runstreams``) and a real broker, bytes as sent.

Every wait is bounded by ``WAIT`` and ends as soon as its condition holds; no
test measures speed. Streams that compare exact bytes set a long heartbeat so a
keep-alive cannot land in the middle on a slow machine.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from streams.core.ids import b64url_encode, event_id_parse, progress_decode, progress_encode
from tests.support.sse_client import Event, EventParser

pytestmark = pytest.mark.services

WAIT = 30.0  # upper bound for any single wait; never an expectation of speed
QUIET = 3600  # heartbeat_seconds for streams whose bytes are compared exactly


def start_bytes(progress: dict[int, int], retry_ms: int = 2000) -> bytes:
    return f"retry: {retry_ms}\nid: {progress_encode(progress)}\n\n".encode()


def frame(progress: dict[int, int], *data_lines: str, event: str | None = None, etag: str | None = None) -> bytes:
    event_id = progress_encode(progress) + (f"/{etag}" if etag is not None else "")
    out = f"id: {event_id}\n"
    if event is not None:
        out += f"event: {event}\n"
    out += "".join(f"data: {line}\n" for line in data_lines)
    return (out + "\n").encode()


class Stream:
    """An open event stream: the raw bytes so far and the events a browser would see."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.raw = b""
        self.parser = EventParser()
        self.events: list[Event] = []
        self._chunks = response.aiter_raw()

    @property
    def messages(self) -> list[Event]:
        return [e for e in self.events if e.has_data]

    @property
    def data(self) -> list[str]:
        return [e.data for e in self.messages]

    async def read_until(self, condition: Callable[[Stream], bool], limit: float = WAIT) -> Stream:
        async def read() -> None:
            while not condition(self):
                chunk = await anext(self._chunks)
                self.raw += chunk
                self.events += self.parser.feed(chunk)

        await asyncio.wait_for(read(), limit)
        return self

    async def read_bytes(self, count: int) -> bytes:
        await self.read_until(lambda s: len(s.raw) >= count)
        return self.raw

    async def read_messages(self, count: int) -> list[Event]:
        await self.read_until(lambda s: len(s.messages) >= count)
        return self.messages

    async def read_data(self, last: str) -> list[str]:
        """Read until an event with data ``last`` arrives; all data so far."""
        await self.read_until(lambda s: last in s.data)
        return self.data

    async def started(self) -> str:
        """Wait for the start checkpoint; its id."""
        await self.read_until(lambda s: bool(s.events))
        first = self.events[0]
        assert not first.has_data
        assert first.id is not None
        return first.id


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    path: str,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | httpx.QueryParams | None = None,
) -> AsyncIterator[Stream]:
    async with client.stream("GET", path, headers=headers, params=params) as response:
        assert response.status_code == 200, (await response.aread()).decode("utf-8", "replace")
        yield Stream(response)


def assert_ids_follow_offsets(events: list[Event], start: dict[int, int]) -> None:
    """Each id is the progress after its event: per partition, the next offset to read.

    Payloads are ``p<partition>-<offset>``; with no filter, every record moves its
    partition's progress to offset + 1 and leaves the others where they were.
    """
    progress = dict(start)
    for event in events:
        partition, offset = (int(part) for part in event.data[1:].split("-"))
        progress[partition] = offset + 1
        assert event.id is not None
        assert progress_decode(event.id) == progress, event


def error_body(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["error"] == code
    assert body["status"] == status
    assert body["detail"]
    return body


# -- framing ---------------------------------------------------------------------------


async def test_response_head(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/head/{topic}", topic="${params.topic}")
    async with open_stream(client, f"/w/head/{topic}") as stream:
        headers = stream.response.headers
        assert headers["content-type"] == "text/event-stream; charset=utf-8"
        assert headers["cache-control"] == "no-cache, no-transform"
        assert headers["x-accel-buffering"] == "no"
        await stream.started()


async def test_exact_bytes_of_awkward_payloads(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/bytes/{topic}", topic="${params.topic}", initial="earliest", heartbeat_seconds=QUIET)
    for payload in ["line 1\nline 2\nline 3", "cr\ronly", "crlf\r\nend\r\n", "", " leading space", "  two\n\n"]:
        kafka.produce(topic, payload, partition=0)
    kafka.produce(topic, None, key="k1", partition=0)
    expected = (
        start_bytes({0: 0})
        + frame({0: 1}, "line 1", "line 2", "line 3")
        + frame({0: 2}, "cr", "only")
        + frame({0: 3}, "crlf", "end", "")
        + frame({0: 4}, "")
        + frame({0: 5}, " leading space")
        + frame({0: 6}, "  two", "", "")
        + frame({0: 7}, "azE=", event="delete")
    )
    async with open_stream(client, f"/w/bytes/{topic}") as stream:
        assert await stream.read_bytes(len(expected)) == expected
        # The same bytes for a record that arrives live.
        kafka.produce(topic, "\rlive\r\n x", partition=0)
        live = frame({0: 8}, "", "live", " x")
        assert await stream.read_bytes(len(expected) + len(live)) == expected + live
    assert [e.data for e in stream.messages] == [
        "line 1\nline 2\nline 3",
        "cr\nonly",
        "crlf\nend\n",
        "",
        " leading space",
        "  two\n\n",
        "azE=",
        "\nlive\n x",
    ]
    assert stream.messages[6].type == "delete"


async def test_tombstones_become_delete_events(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/tomb/{topic}", topic="${params.topic}", heartbeat_seconds=QUIET)
    async with open_stream(client, f"/w/tomb/{topic}") as stream:
        start = await stream.started()
        assert stream.raw == f"retry: 2000\nid: {start}\n\n".encode()
        kafka.produce(topic, None, key=b"\xfb\xffk")
        kafka.produce(topic, None)  # no key either
        kafka.produce(topic, "after")
        await stream.read_data("after")
    assert stream.raw == (
        start_bytes({0: 0})
        + frame({0: 1}, b64url_encode(b"\xfb\xffk"), event="delete")
        + frame({0: 2}, "", event="delete")
        + frame({0: 3}, "after")
    )
    assert b64url_encode(b"\xfb\xffk") == "-_9r"


async def test_binary_values_skipped_or_base64(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/skip/{topic}", topic="${params.topic}", initial="earliest")
    route(path="/w/b64/{topic}", topic="${params.topic}", initial="earliest", binary="base64")
    kafka.produce(topic, b"\xff\xfe")
    kafka.produce(topic, "text")
    async with open_stream(client, f"/w/skip/{topic}") as stream:
        assert await stream.read_data("text") == ["text"]
        assert progress_decode(stream.messages[0].id) == {0: 2}
    async with open_stream(client, f"/w/b64/{topic}") as stream:
        assert await stream.read_data("text") == ["__4=", "text"]


# -- ids -------------------------------------------------------------------------------


async def test_live_ids_are_next_offsets_over_three_partitions(client, kafka, route) -> None:
    topic = kafka.topic(partitions=3)
    route(path="/w/ids/{topic}", topic="${params.topic}")
    async with open_stream(client, f"/w/ids/{topic}") as stream:
        assert progress_decode(await stream.started()) == {0: 0, 1: 0, 2: 0}
        expected = {0: 0, 1: 0, 2: 0}
        for count, partition in enumerate([0, 2, 2, 1, 0, 2], start=1):
            payload = f"p{partition}-{expected[partition]}"
            kafka.produce(topic, payload, partition=partition)
            expected[partition] += 1
            [*_, event] = await stream.read_messages(count)
            assert event.data == payload
            assert event.id == progress_encode(expected)
        assert progress_decode(stream.messages[-1].id) == {0: 2, 1: 1, 2: 3}
        assert_ids_follow_offsets(stream.messages, {0: 0, 1: 0, 2: 0})


async def test_catch_up_ids_are_next_offsets_over_three_partitions(client, kafka, route) -> None:
    topic = kafka.topic(partitions=3)
    route(path="/w/cids/{topic}", topic="${params.topic}", initial="earliest")
    counts = {0: 0, 1: 0, 2: 0}
    for partition in [1, 0, 2, 2, 0, 1, 1, 2, 1]:
        kafka.produce(topic, f"p{partition}-{counts[partition]}", partition=partition)
        counts[partition] += 1
    async with open_stream(client, f"/w/cids/{topic}") as stream:
        assert progress_decode(await stream.started()) == {0: 0, 1: 0, 2: 0}
        events = await stream.read_messages(9)
    assert_ids_follow_offsets(events, {0: 0, 1: 0, 2: 0})
    assert progress_decode(events[-1].id) == {0: 2, 1: 4, 2: 3}
    for partition, count in counts.items():
        assert [e.data for e in events if e.data.startswith(f"p{partition}-")] == [
            f"p{partition}-{i}" for i in range(count)
        ]


async def test_etag_header_gives_progress_slash_etag(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/etag/{topic}", topic="${params.topic}", initial="earliest", heartbeat_seconds=QUIET)
    kafka.produce(topic, "one", headers={"etag": "v1"})
    kafka.produce(topic, "two")
    kafka.produce(topic, "three", headers={"etag": 'W/"x\r\n7"'})
    expected = (
        start_bytes({0: 0})
        + frame({0: 1}, "one", etag="v1")
        + frame({0: 2}, "two")
        + frame({0: 3}, "three", etag='W/"x7"')  # CR and LF stripped from the id
    )
    async with open_stream(client, f"/w/etag/{topic}") as stream:
        assert await stream.read_bytes(len(expected)) == expected
        first_id = stream.messages[0].id
    assert first_id == f"{progress_encode({0: 1})}/v1"
    # Resuming from an etag id goes on after its progress.
    async with open_stream(client, f"/w/etag/{topic}", headers={"last-event-id": first_id}) as stream:
        assert await stream.read_data("three") == ["two", "three"]


async def test_key_form_ids_and_resume_from_them(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/w/key/{topic}", topic="${params.topic}", initial="earliest", event_id="key")
    kafka.produce(topic, "p0-0", key="k1", partition=0)
    kafka.produce(topic, "p1-0", partition=1)
    kafka.produce(topic, "p0-1", key=b"\xfb\xff", partition=0, headers={"etag": "ignored"})
    async with open_stream(client, f"/w/key/{topic}") as stream:
        start = await stream.started()
        assert progress_decode(start) == {0: 0, 1: 0}  # the start checkpoint is a plain progress
        events = await stream.read_messages(3)
    by_data = {e.data: e.id for e in events}
    p0_0 = progress_decode(json.loads(by_data["p0-0"])[1])
    assert by_data["p0-0"] == f'["azE=","{progress_encode(p0_0)}"]'
    assert p0_0[0] == 1
    assert by_data["p1-0"].startswith('[null,"')
    assert by_data["p0-1"].startswith('["-_8=","')
    for event in events:
        _key, progress = json.loads(event.id)
        assert " " not in event.id
        assert event_id_parse(event.id).progress == progress_decode(progress)
    assert progress_decode(json.loads(events[-1].id)[1]) == {0: 2, 1: 1}
    # Resume from the first event's key-form id: the rest, nothing twice.
    first = events[0]
    async with open_stream(client, f"/w/key/{topic}", headers={"last-event-id": first.id}) as stream:
        assert progress_decode(await stream.started()) == progress_decode(json.loads(first.id)[1])
        await stream.read_messages(2)
        kafka.produce(topic, "end", partition=0)
        data = await stream.read_data("end")
    assert sorted(data[:2]) == sorted(e.data for e in events[1:])
    assert data[2:] == ["end"]


# -- filters ---------------------------------------------------------------------------


async def test_key_and_header_filters_from_path_parameters(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(
        path="/w/any/{topic}/{who}/{color}",
        topic="${params.topic}",
        filters=[{"key": "${params.who}"}, {"headers": {"color": "${params.color}"}}],
        initial="earliest",
    )
    route(
        path="/w/all/{topic}/{who}/{color}",
        topic="${params.topic}",
        filters=[{"key": "${params.who}", "headers": {"color": "${params.color}", "size": "xl"}}],
        initial="earliest",
    )
    messages = [
        ("alice", {}, "a-plain"),
        ("bob", {"color": "red"}, "b-red"),
        ("bob", {"color": "blue"}, "b-blue"),
        ("alice", {"color": "red", "size": "xl"}, "a-red-xl"),
        ("alice", {"color": "red", "size": "s"}, "a-red-s"),
        ("carol", {}, "c-plain"),
        (None, {"color": "red"}, "none-red"),
        ("alicex", {}, "ax-plain"),
        ("alice", {"color": "RED", "size": "xl"}, "a-RED-xl"),
    ]
    for key, headers, payload in messages:
        kafka.produce(topic, payload, key=key, headers=headers, partition=0)
    kafka.produce(topic, "filtered-out", key="zed", partition=1)
    kafka.produce(topic, "end", key="alice", headers={"color": "red", "size": "xl"}, partition=0)
    async with open_stream(client, f"/w/any/{topic}/alice/red") as stream:
        assert await stream.read_data("end") == [
            "a-plain",
            "b-red",
            "a-red-xl",
            "a-red-s",
            "none-red",
            "a-RED-xl",
            "end",
        ]
        # Progress moves over what the filters rejected, in every partition.
        assert progress_decode(stream.messages[-1].id) == {0: 10, 1: 1}
    async with open_stream(client, f"/w/all/{topic}/alice/red") as stream:
        assert await stream.read_data("end") == ["a-red-xl", "end"]
    async with open_stream(client, f"/w/any/{topic}/bob/blue") as stream:
        await stream.read_data("b-blue")
        kafka.produce(topic, "bob-end", key="bob", partition=1)
        assert await stream.read_data("bob-end") == ["b-red", "b-blue", "bob-end"]


async def test_live_filters_and_checkpoint_after_filtered_traffic(client, kafka, route) -> None:
    topic = kafka.topic()
    route(
        path="/w/live-filter/{topic}/{who}",
        topic="${params.topic}",
        filters=[{"key": "${params.who}"}],
        heartbeat_seconds=1,
    )
    async with open_stream(client, f"/w/live-filter/{topic}/alice") as stream:
        await stream.started()
        kafka.produce(topic, "mine", key="alice")
        kafka.produce(topic, "theirs", key="bob")
        kafka.produce(topic, "theirs too", key="bob")
        kafka.produce(topic, "mine again", key="alice")
        assert await stream.read_data("mine again") == ["mine", "mine again"]
        assert progress_decode(stream.messages[-1].id) == {0: 4}
        # Only rejected traffic now: the next keep-alive carries a fresh checkpoint.
        kafka.produce(topic, "theirs at the end", key="bob")
        await stream.read_until(lambda s: s.parser.last_id == progress_encode({0: 5}))
        assert stream.data == ["mine", "mine again"]
        assert b":\nid: " + progress_encode({0: 5}).encode() + b"\n\n" in stream.raw


# -- where a stream starts -------------------------------------------------------------


async def test_initial_live_starts_at_the_end(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/w/live/{topic}", topic="${params.topic}")
    kafka.produce(topic, "old 0", partition=0)
    kafka.produce(topic, "old 1", partition=1)
    kafka.produce(topic, "old 2", partition=1)
    async with open_stream(client, f"/w/live/{topic}") as stream:
        assert progress_decode(await stream.started()) == {0: 1, 1: 2}
        kafka.produce(topic, "new", partition=1)
        assert await stream.read_data("new") == ["new"]
        assert progress_decode(stream.messages[0].id) == {0: 1, 1: 3}


async def test_initial_earliest_replays_everything_then_live(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/w/earliest/{topic}", topic="${params.topic}", initial="earliest")
    for i in range(4):
        kafka.produce(topic, f"p{i % 2}-{i // 2}", partition=i % 2)
    async with open_stream(client, f"/w/earliest/{topic}") as stream:
        assert progress_decode(await stream.started()) == {0: 0, 1: 0}
        await stream.read_messages(4)
        kafka.produce(topic, "p1-2", partition=1)
        await stream.read_data("p1-2")
    assert sorted(stream.data) == ["p0-0", "p0-1", "p1-0", "p1-1", "p1-2"]
    assert stream.data[-1] == "p1-2"
    assert_ids_follow_offsets(stream.messages, {0: 0, 1: 0})


async def test_initial_snapshot_latest_per_key_then_live(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/w/snap/{topic}", topic="${params.topic}", initial="snapshot")
    kafka.produce(topic, "k1 v1", key="k1", partition=0)  # 0:0
    kafka.produce(topic, "k2 v1", key="k2", partition=0)  # 0:1
    kafka.produce(topic, "k3 v1", key="k3", partition=1)  # 1:0
    kafka.produce(topic, "k1 v2", key="k1", partition=0)  # 0:2
    kafka.produce(topic, None, key="k2", partition=0)  # 0:3 tombstone: k2 gone
    kafka.produce(topic, "k4 v1", key="k4", partition=1)  # 1:1
    kafka.produce(topic, None, key="k4", partition=1)  # 1:2 tombstone
    kafka.produce(topic, "k4 v2", key="k4", partition=1)  # 1:3 back again
    kafka.produce(topic, "k3 v2", key="k3", partition=1)  # 1:4
    async with open_stream(client, f"/w/snap/{topic}") as stream:
        assert progress_decode(await stream.started()) == {0: 0, 1: 0}
        await stream.read_messages(3)
        # The snapshot ends with an id-only checkpoint at the end of the log.
        await stream.read_until(lambda s: s.parser.last_id == progress_encode({0: 4, 1: 5}))
        kafka.produce(topic, None, key="k1", partition=0)
        kafka.produce(topic, "k5 v1", key="k5", partition=1)
        await stream.read_messages(5)
    assert [(e.type, e.data) for e in stream.messages[:3]] == [
        ("message", "k1 v2"),
        ("message", "k4 v2"),
        ("message", "k3 v2"),
    ]
    # Partition by partition: a resume mid-snapshot replays, never loses.
    assert [progress_decode(e.id) for e in stream.messages[:3]] == [{0: 3, 1: 0}, {0: 4, 1: 4}, {0: 4, 1: 5}]
    # Then live (two partitions: either may come first); tombstones are delete events live.
    live = {(e.type, e.data): progress_decode(e.id) for e in stream.messages[3:]}
    assert set(live) == {("delete", "azE="), ("message", "k5 v1")}
    assert live[("delete", "azE=")][0] == 5
    assert live[("message", "k5 v1")][1] == 6
    assert progress_decode(stream.messages[-1].id) == {0: 5, 1: 6}
    checkpoints = [e for e in stream.events if not e.has_data]
    assert [progress_decode(e.id) for e in checkpoints] == [{0: 0, 1: 0}, {0: 4, 1: 5}]


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


async def test_since_iso_and_epoch_ms(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/w/since/{topic}", topic="${params.topic}", allow_since=True)
    now = int(time.time() * 1000)
    old, since, new = now - 3_600_000, now - 1_800_000, now - 60_000
    for i in range(3):
        kafka.produce(topic, f"p{i % 2} old {i}", partition=i % 2, timestamp=old + i)
    for i in range(3):
        kafka.produce(topic, f"p{i % 2} new {i}", partition=i % 2, timestamp=new + i)
    # Older than `since` but after the first newer record of its partition: it counts.
    kafka.produce(topic, "p1 old after new", partition=1, timestamp=old + 10)
    expected = {"p0": ["p0 new 0", "p0 new 2"], "p1": ["p1 new 1", "p1 old after new"]}
    # The first request finds the topic's hub cold, the later ones warm.
    for form in (iso(since), iso(since).replace("+00:00", "Z"), str(since)):
        async with open_stream(client, f"/w/since/{topic}", params={"since": form}) as stream:
            await stream.started()
            marker = f"live after {form}"
            kafka.produce(topic, f"p0 {marker}", partition=0)
            kafka.produce(topic, f"p1 {marker}", partition=1)
            await stream.read_until(lambda s, m=marker: f"p0 {m}" in s.data and f"p1 {m}" in s.data)
        for partition, payloads in expected.items():
            payloads.append(f"{partition} {marker}")
            assert [d for d in stream.data if d.startswith(partition)] == payloads


async def test_since_on_a_warm_hub(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/since2/{topic}", topic="${params.topic}", allow_since=True)
    route(path="/w/warm/{topic}", topic="${params.topic}")
    now = int(time.time() * 1000)
    async with open_stream(client, f"/w/warm/{topic}") as warm:  # the hub now caches what follows
        await warm.started()
        kafka.produce(topic, "older", timestamp=now - 20_000)
        kafka.produce(topic, "newer", timestamp=now - 10_000)
        await warm.read_data("newer")
        async with open_stream(client, f"/w/since2/{topic}", params={"since": str(now - 15_000)}) as stream:
            # The start is where Kafka says (a lower bound on brokers that answer 0).
            assert progress_decode(await stream.started())[0] <= 1
            kafka.produce(topic, "live")
            assert await stream.read_data("live") == ["newer", "live"]
        async with open_stream(client, f"/w/since2/{topic}", params={"since": str(now + 60_000)}) as stream:
            await stream.started()
            kafka.produce(topic, "future", timestamp=now + 120_000)
            assert await stream.read_data("future") == ["future"]


# -- resume ----------------------------------------------------------------------------


async def first_pass(client: httpx.AsyncClient, path: str, count: int) -> list[Event]:
    async with open_stream(client, path) as stream:
        return await stream.read_messages(count)


async def test_resume_with_last_event_id_header(client, kafka, route) -> None:
    topic = kafka.topic(partitions=3)
    route(path="/w/resume/{topic}", topic="${params.topic}", initial="earliest")
    counts = dict.fromkeys(range(3), 0)
    for partition in [0, 1, 2, 0, 1, 2, 2]:
        kafka.produce(topic, f"p{partition}-{counts[partition]}", partition=partition)
        counts[partition] += 1
    events = await first_pass(client, f"/w/resume/{topic}", 7)
    markers: list[str] = []
    for cut in (0, 3, 6):
        last = events[cut]
        expected = [e.data for e in events[cut + 1 :]] + markers
        async with open_stream(client, f"/w/resume/{topic}", headers={"Last-Event-ID": last.id}) as stream:
            assert await stream.started() == last.id
            await stream.read_messages(len(expected))
            marker = f"p0-{counts[0]}"
            kafka.produce(topic, marker, partition=0)
            counts[0] += 1
            await stream.read_data(marker)
        # Everything after the id, once, each partition in order, then the new record.
        assert sorted(stream.data[:-1]) == sorted(expected)
        assert stream.data[-1] == marker
        assert_ids_follow_offsets(stream.messages, progress_decode(last.id))
        markers.append(marker)


async def test_resume_with_last_event_id_query(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/query/{topic}", topic="${params.topic}", initial="earliest")
    route(path="/w/qkey/{topic}", topic="${params.topic}", initial="earliest", event_id="key")
    for i in range(4):
        kafka.produce(topic, f"p0-{i}", key=f"k{i}")
    events = await first_pass(client, f"/w/query/{topic}", 4)
    last = events[1]
    assert last.id.endswith("==")  # one partition: a padded token
    async with open_stream(client, f"/w/query/{topic}", params={"lastEventId": last.id}) as stream:
        assert await stream.started() == last.id
        await stream.read_messages(2)
    assert stream.data == ["p0-2", "p0-3"]
    # Percent-encoded by hand, as a page building the URL itself would.
    encoded = last.id.replace("=", "%3D")
    async with open_stream(client, f"/w/query/{topic}?lastEventId={encoded}") as stream:
        assert await stream.started() == last.id
        await stream.read_messages(2)
    assert stream.data == ["p0-2", "p0-3"]
    # The key form, whose JSON needs URL encoding.
    key_events = await first_pass(client, f"/w/qkey/{topic}", 4)
    assert key_events[2].id == f'["azI=","{progress_encode({0: 3})}"]'
    async with open_stream(client, f"/w/qkey/{topic}", params={"lastEventId": key_events[2].id}) as stream:
        assert progress_decode(await stream.started()) == {0: 3}
        await stream.read_messages(1)
    assert stream.data == ["p0-3"]
    # The header wins over the query.
    async with open_stream(
        client, f"/w/query/{topic}", headers={"last-event-id": last.id}, params={"lastEventId": "not-an-id!"}
    ) as stream:
        assert await stream.started() == last.id


async def test_resume_names_fewer_partitions_than_the_topic_has(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/w/fewer/{topic}", topic="${params.topic}")
    kafka.produce(topic, "p0-0", partition=0)
    kafka.produce(topic, "p0-1", partition=0)
    kafka.produce(topic, "p1-0", partition=1)
    # Partition 1 is not named: it starts at its earliest retained offset.
    last = progress_encode({0: 1})
    async with open_stream(client, f"/w/fewer/{topic}", headers={"last-event-id": last}) as stream:
        assert progress_decode(await stream.started()) == {0: 1, 1: 0}
        await stream.read_messages(2)
    assert sorted(stream.data) == ["p0-1", "p1-0"]


# -- refusals --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "garbage!",
        "AQQABAIC====",
        "AgQABAIC",  # version 2
        "AQQABA",  # truncated
        "AQIAAAA=",  # trailing byte
        "[null,AQIAAA==]",
        '["azE="]',
        '[null,"[null,\\"AQIAAA==\\"]"]',
    ],
)
async def test_malformed_last_event_id_is_400(client, kafka, route, bad: str) -> None:
    topic = kafka.topic()
    route(path="/w/bad/{topic}", topic="${params.topic}")
    response = await client.get(f"/w/bad/{topic}", headers={"last-event-id": bad})
    error_body(response, 400, "invalid_last_event_id")
    response = await client.get(f"/w/bad/{topic}", params={"lastEventId": bad})
    error_body(response, 400, "invalid_last_event_id")


async def test_last_event_id_over_1024_bytes_is_400(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/long/{topic}", topic="${params.topic}")
    longest = progress_encode({0: 0}) + "/" + "e" * (1024 - 9)
    assert len(longest) == 1024
    async with open_stream(client, f"/w/long/{topic}", headers={"last-event-id": longest}) as stream:
        assert await stream.started() == progress_encode({0: 0})
    too_long = longest + "e"
    body = error_body(
        await client.get(f"/w/long/{topic}", headers={"last-event-id": too_long}), 400, "invalid_last_event_id"
    )
    assert "1024" in body["detail"]
    body = error_body(
        await client.get(f"/w/long/{topic}", params={"lastEventId": too_long}), 400, "invalid_last_event_id"
    )
    assert "1024" in body["detail"]


async def test_last_event_id_naming_a_missing_partition_is_400(client, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(path="/w/part/{topic}", topic="${params.topic}")
    response = await client.get(f"/w/part/{topic}", headers={"last-event-id": progress_encode({0: 0, 2: 0})})
    body = error_body(response, 400, "invalid_last_event_id")
    assert "partition 2" in body["detail"]


async def test_since_on_a_route_that_does_not_allow_it_is_400(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/nosince/{topic}", topic="${params.topic}")
    route(path="/w/yessince/{topic}", topic="${params.topic}", allow_since=True)
    error_body(await client.get(f"/w/nosince/{topic}", params={"since": "0"}), 400, "invalid_since")
    for bad in ("yesterday", "2024-13-01T00:00:00", ""):
        error_body(await client.get(f"/w/yessince/{topic}", params={"since": bad}), 400, "invalid_since")


async def test_no_matching_route_is_404(client, route) -> None:
    route(path="/w/exists/{topic}", topic="${params.topic}")
    response = await client.get("/w/exists/a/b")
    assert response.status_code == 404
    response = await client.get("/w/nothing-here")
    assert response.status_code == 404


async def test_unknown_topic_is_404_json(client, kafka, route) -> None:
    route(path="/w/missing/{topic}", topic="${params.topic}")
    name = f"absent-{time.monotonic_ns()}"
    body = error_body(await client.get(f"/w/missing/{name}"), 404, "unknown_topic")
    assert name in body["detail"]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
async def test_other_methods_are_405_with_allow(client, kafka, route, method: str) -> None:
    topic = kafka.topic()
    route(path="/w/method/{topic}", topic="${params.topic}")
    response = await client.request(method, f"/w/method/{topic}", content=b"")
    error_body(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "GET, HEAD"


async def test_head_gives_headers_and_no_body(client, kafka, route) -> None:
    topic = kafka.topic()
    route(path="/w/hd/{topic}", topic="${params.topic}", initial="earliest")
    kafka.produce(topic, "something")
    response = await client.head(f"/w/hd/{topic}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache, no-transform"
    assert response.content == b""
    # HEAD is refused like GET would be.
    response = await client.head(f"/w/hd/{topic}", headers={"last-event-id": "garbage!"})
    assert response.status_code == 400
