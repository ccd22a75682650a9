"""A stream on a configured topic Kafka does not have yet: held for an event-stream client, served once it exists.

A configured topic is one with a Topic row, or a route's literal topic. A templated
route naming a topic that is neither configured nor in Kafka keeps its 404.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from streams.core.ids import progress_decode, progress_encode
from tests.streams.edge.test_mux_wire import members, positions
from tests.streams.edge.test_wire import WAIT, Stream, error_body

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
SSE = {"accept": "text/event-stream"}


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


def create(kafka: Any, name: str, partitions: int = 1) -> None:
    """Create ``name`` in Kafka as an operator would (the admin API), and wait for its answer."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})
    for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        future.result(timeout=WAIT)


def head_of(stream: Stream, topic: str) -> bytes:
    assert stream.response.headers["content-type"].startswith("text/event-stream")
    notice = f": topic '{topic}' does not exist in Kafka yet; waiting for it to be created\n\n"
    assert stream.raw.startswith(b"retry: 2000\n" + notice.encode()), stream.raw
    return stream.raw


@pytest.mark.parametrize("configured_by", ["topic row", "literal route"])
async def test_held_until_the_topic_is_created_then_served_from_its_start(
    client: httpx.AsyncClient, kafka: Any, route: Any, configured_by: str
) -> None:
    from streams.services import topic_upsert

    topic = f"later-{uuid.uuid4().hex[:10]}"
    if configured_by == "topic row":
        topic_upsert(name=topic)
        path = f"/wait/row/{topic}"
        route(path="/wait/row/{topic}", topic="${params.topic}", heartbeat_seconds=1)
    else:
        path = f"/wait/{topic}"
        route(path=path, topic=topic, heartbeat_seconds=1)  # initial: latest
    # A script (no text/event-stream in accept) gets the 404, which says the topic is configured.
    body = error_body(await client.get(path), 404, "unknown_topic")
    assert body["configured"] is True
    assert topic in body["detail"]
    async with client.stream("GET", path, headers=SSE) as response:
        assert response.status_code == 200
        stream = Stream(response)
        await stream.read_until(lambda s: s.raw.count(b"\n\n") >= 2)
        head = head_of(stream, topic)
        # An id naming no position: a reconnection starts at the topic's beginning too.
        assert f"\n\nid: {progress_encode({})}\n\n".encode() in head
        await stream.read_until(lambda s: b"\n\n:\n\n" in s.raw)  # heartbeats while held
        create(kafka, topic)
        kafka.produce(topic, "first")  # produced before the held stream finds the topic: still delivered
        kafka.produce(topic, "second")
        assert await stream.read_data("second") == ["first", "second"]
    ids = [e.id for e in stream.messages]
    assert ids[0] is not None
    assert [progress_decode(i or "") for i in ids] == [{0: 1}, {0: 2}]


async def test_an_unconfigured_topic_on_a_templated_route_keeps_its_404(
    client: httpx.AsyncClient, kafka: Any, route: Any
) -> None:
    route(path="/wait/none/{topic}", topic="${params.topic}")
    name = f"absent-{uuid.uuid4().hex[:10]}"
    body = error_body(await client.get(f"/wait/none/{name}", headers=SSE), 404, "unknown_topic")
    assert name in body["detail"]
    assert "configured" not in body


async def test_a_multiplexed_stream_is_held_whole_until_its_members_topic_exists(
    client: httpx.AsyncClient, kafka: Any, route: Any
) -> None:
    """Members open together before the response, so a member's missing topic holds the whole stream."""
    present, later, tag = kafka.topic(), f"later-{uuid.uuid4().hex[:10]}", uuid.uuid4().hex[:6]
    route(path=f"/wait/{tag}/present", topic=present, initial="earliest", heartbeat_seconds=1)
    route(path=f"/wait/{tag}/later", topic=later, heartbeat_seconds=1)
    kafka.produce(present, "already there")
    query = members(f"now:/wait/{tag}/present", f"soon:/wait/{tag}/later")
    async with client.stream("GET", "/streams", params=query, headers=SSE) as response:
        assert response.status_code == 200
        stream = Stream(response)
        await stream.read_until(lambda s: s.raw.count(b"\n\n") >= 2)
        notice = f": member soon: topic '{later}' does not exist in Kafka yet; waiting for it to be created\n\n"
        assert stream.raw.startswith(b"retry: 2000\n" + notice.encode()), stream.raw
        assert b"id:" not in stream.raw  # a composite id comes with the stream
        create(kafka, later)
        kafka.produce(later, "new topic")
        await stream.read_until(lambda s: {"already there", "new topic"} <= set(s.data))
    by_member = {(e.type, e.data) for e in stream.messages}
    assert by_member == {("now", "already there"), ("soon", "new topic")}
    last = stream.messages[-1].id
    assert last is not None
    assert positions(last, 2) == [{0: 1}, {0: 1}]
