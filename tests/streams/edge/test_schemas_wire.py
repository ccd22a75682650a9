"""Schemas end to end (SPEC 5): a real gateway and broker, invalid values skipped, counted, and moved past."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from streams.core.ids import progress_decode
from tests.streams.edge.test_wire import WAIT, open_stream
from tests.support.metrics_scrape import metric_wait
from tests.support.polling import condition_wait_async

pytestmark = pytest.mark.services

SCORE = {"type": "object", "required": ["match"], "properties": {"match": {"type": "string"}}}


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


def route_sample(text: str, name: str, **labels: str) -> float:
    """The value of ``name`` whose labels include ``labels`` (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


async def test_topic_schema_skips_counts_and_moves_past(client, kafka, route, stream_db) -> None:
    from streams.services import schema_upsert, topic_upsert

    topic = kafka.topic()
    topic_upsert(name=topic, schema=schema_upsert(name=f"score-{topic}", json_schema=SCORE))
    route(path="/s/topic/{topic}", topic="${params.topic}", heartbeat_seconds=1)
    async with open_stream(client, f"/s/topic/{topic}") as stream:
        start_id = await stream.started()
        kafka.produce(topic, '{"match": "a"}', partition=0)
        kafka.produce(topic, '{"match": 7}', partition=0)  # wrong type
        kafka.produce(topic, "not json", partition=0)
        kafka.produce(topic, '{"match": "b"}', partition=0)
        kafka.produce(topic, "{}", partition=0)  # missing match: the last record
        await stream.read_data('{"match": "b"}')
        # The heartbeat's checkpoint carries the progress past the trailing invalid record.
        await stream.read_until(lambda s: s.parser.last_id is not None and progress_decode(s.parser.last_id) == {0: 5})
    assert stream.data == ['{"match": "a"}', '{"match": "b"}']
    assert [progress_decode(e.id) for e in stream.messages] == [{0: 1}, {0: 4}]
    last_id = stream.parser.last_id
    assert await metric_wait(client, "sluice_schema_rejected_total", topic, lambda v: v == 3, within=WAIT) == 3

    # A resume after the last invalid record replays nothing before it.
    async with open_stream(client, f"/s/topic/{topic}", headers={"Last-Event-ID": last_id}) as resumed:
        await resumed.started()
        kafka.produce(topic, '{"match": "c"}', partition=0)
        assert await resumed.read_data('{"match": "c"}') == ['{"match": "c"}']

    # A catch-up from the cache skips them too.
    async with open_stream(client, f"/s/topic/{topic}", headers={"Last-Event-ID": start_id}) as replay:
        assert await replay.read_data('{"match": "c"}') == ['{"match": "a"}', '{"match": "b"}', '{"match": "c"}']

    text = (await client.get("/metrics")).text
    labels = {"route": "/s/topic/{topic}", "topic": topic}
    assert route_sample(text, "sluice_events_dropped_total", reason="schema", **labels) == 6  # live, then catch-up
    assert route_sample(text, "sluice_events_delivered_total", **labels) == 6


async def test_route_schema_checked_per_route(client, kafka, route, stream_db) -> None:
    from streams.services import schema_upsert

    topic = kafka.topic()
    schema = schema_upsert(name=f"route-score-{topic}", json_schema=SCORE)
    route(path="/s/checked/{topic}", topic="${params.topic}", schema=schema, initial="earliest", heartbeat_seconds=1)
    route(path="/s/raw/{topic}", topic="${params.topic}", initial="earliest")
    route(
        path="/s/keyed/{topic}/{key}",
        topic="${params.topic}",
        schema=schema,
        filters=[{"key": "${params.key}"}],
    )
    async with (
        open_stream(client, f"/s/checked/{topic}") as checked,
        open_stream(client, f"/s/checked/{topic}") as checked_too,
        open_stream(client, f"/s/raw/{topic}") as raw,
        open_stream(client, f"/s/keyed/{topic}/k") as keyed,
    ):
        for s in (checked, checked_too, raw, keyed):
            await s.started()
        for value in ['{"match": "a"}', "[1]", '{"match": "b"}', '{"match": null}']:
            kafka.produce(topic, value, key="k", partition=0)
        kafka.produce(topic, '{"match": "other key"}', key="j", partition=0)
        for s in (checked, checked_too):
            await s.read_data('{"match": "other key"}')
            assert s.data == ['{"match": "a"}', '{"match": "b"}', '{"match": "other key"}']
        assert await raw.read_data('{"match": "other key"}') == [
            '{"match": "a"}',
            "[1]",
            '{"match": "b"}',
            '{"match": null}',
            '{"match": "other key"}',
        ]
        await keyed.read_data('{"match": "b"}')

        async def counted() -> bool:
            text = (await client.get("/metrics")).text
            checked_labels = {"route": "/s/checked/{topic}", "topic": topic}
            keyed_labels = {"route": "/s/keyed/{topic}/{key}", "topic": topic}
            return (
                route_sample(text, "sluice_route_schema_rejected_total", **checked_labels) == 2
                and route_sample(text, "sluice_events_dropped_total", reason="schema", **checked_labels) == 4
                and route_sample(text, "sluice_events_dropped_total", reason="schema", **keyed_labels) == 2
                and route_sample(text, "sluice_events_dropped_total", reason="filter", **keyed_labels) == 1
                and route_sample(text, "sluice_events_dropped_total", reason="schema", route="/s/raw/{topic}") == 0
                and route_sample(text, "sluice_streams_open", **checked_labels) == 2
            )

        await condition_wait_async(counted, within=WAIT, what="per-route schema and filter counts")


async def test_registry_schema_on_a_route(client, kafka, route, stream_db) -> None:
    from streams.services import schema_upsert
    from tests.support.schema_registry import registry_serve

    topic = kafka.topic()
    with registry_serve() as registry:
        registry.register(f"{topic}-value", SCORE)
        schema = schema_upsert(name=f"reg-{topic}", registry_url=registry.url, subject=f"{topic}-value")
        route(path="/s/registry/{topic}", topic="${params.topic}", schema=schema, heartbeat_seconds=1)
        async with open_stream(client, f"/s/registry/{topic}") as stream:
            await stream.started()
            for value in ['{"match": "a"}', '{"match": 1}', '{"match": "b"}']:
                kafka.produce(topic, value, partition=0)
            assert await stream.read_data('{"match": "b"}') == ['{"match": "a"}', '{"match": "b"}']
    assert any(f"/subjects/{topic}-value/versions/" in r for r in registry.requests)
