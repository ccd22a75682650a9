"""Registry-encoded records end to end (SPEC 8): a real gateway, broker and registry, bytes from real serializers.

Producers use confluent-kafka's own Avro, Protobuf and JSON Schema serializers
against a loopback registry, so the records carry exactly what real producers
write; the streams are read as a browser reads them.
"""

from __future__ import annotations

import datetime
import decimal
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from streams.core.ids import b64url_encode, event_id_parse
from tests.streams.edge.test_wire import QUIET, WAIT, open_stream
from tests.support.metrics_scrape import metric_wait
from tests.support.schema_registry import RegistryServer, registry_running

pytestmark = pytest.mark.services

MATCH_AVRO = {
    "type": "record",
    "name": "Match",
    "namespace": "sluice.test",
    "fields": [
        {"name": "id", "type": "string"},
        {
            "name": "home",
            "type": {
                "type": "record",
                "name": "Team",
                "fields": [{"name": "name", "type": "string"}, {"name": "goals", "type": "int"}],
            },
        },
        {"name": "scorers", "type": {"type": "array", "items": "string"}},
        {"name": "referee", "type": ["null", "string"], "default": None},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["SCHEDULED", "LIVE", "FINISHED"]}},
        {"name": "odds", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "kickoff", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "signature", "type": "bytes"},
    ],
}
MATCH_VALUE = {
    "id": "m1",
    "home": {"name": "Lions", "goals": 2},
    "scorers": ["Ada", "Bo"],
    "referee": None,
    "status": "LIVE",
    "odds": decimal.Decimal("12.50"),
    "kickoff": datetime.datetime(2026, 5, 17, 19, 45, 0, 250000, tzinfo=datetime.UTC),
    "signature": b"\x00\xffsig",
}
MATCH_JSON = {
    "id": "m1",
    "home": {"name": "Lions", "goals": 2},
    "scorers": ["Ada", "Bo"],
    "referee": None,
    "status": "LIVE",
    "odds": "12.50",
    "kickoff": "2026-05-17T19:45:00.250000Z",
    "signature": "AP9zaWc=",
}
SCORE_AVRO = {
    "type": "record",
    "name": "Score",
    "fields": [{"name": "n", "type": "int"}, {"name": "note", "type": ["null", "string"], "default": None}],
}


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


@pytest.fixture
def registry() -> Iterator[RegistryServer]:
    with registry_running() as server:
        yield server


def serializer(kind: str, registry: RegistryServer, schema: Any = None, part: str = "value") -> Any:
    """confluent-kafka's serializer of ``kind``, as a producer would make it; ``serialize(topic, value)``."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": registry.registry.url})
    if kind == "avro":
        serialize = AvroSerializer(client, json.dumps(schema))
    elif kind == "protobuf":
        serialize = ProtobufSerializer(schema, client, {"use.deprecated.format": False})
    else:
        serialize = JSONSerializer(json.dumps(schema), client)
    field = MessageField.KEY if part == "key" else MessageField.VALUE
    return lambda topic, value: serialize(value, SerializationContext(topic, field))


async def test_avro_record_arrives_as_json(client, kafka, route, registry) -> None:
    from streams.services import topic_upsert

    topic = kafka.topic()
    topic_upsert(name=topic, value_format="avro", registry=registry.registry.url)
    route(path="/s/avro/{topic}", topic="${params.topic}", heartbeat_seconds=QUIET)
    serialize = serializer("avro", registry, MATCH_AVRO)
    async with open_stream(client, f"/s/avro/{topic}") as stream:
        await stream.started()
        kafka.produce(topic, serialize(topic, MATCH_VALUE))
        kafka.produce(topic, serialize(topic, {**MATCH_VALUE, "referee": "Cy", "scorers": []}))
        await stream.read_messages(2)
    assert [json.loads(data) for data in stream.data] == [MATCH_JSON, {**MATCH_JSON, "referee": "Cy", "scorers": []}]
    # Compact JSON: no spaces between tokens.
    assert stream.data[0] == json.dumps(MATCH_JSON, separators=(",", ":"))


async def test_protobuf_message_of_a_second_message_type_arrives_as_json(client, kafka, route, registry) -> None:
    from streams.services import topic_upsert
    from tests.support.protobuf_messages import Match

    topic = kafka.topic()
    topic_upsert(name=topic, value_format="protobuf", registry=registry.registry.url)
    route(path="/s/proto/{topic}", topic="${params.topic}", heartbeat_seconds=QUIET)
    serialize = serializer("protobuf", registry, Match)
    first = Match(id="m1", scorers=["Ada", "Bo"], minute=42, status=Match.LIVE, attendance=40_123)
    first.home.name, first.home.goals = "Lions", 2
    second = Match(id="m2", note="postponed", status=Match.SCHEDULED)
    async with open_stream(client, f"/s/proto/{topic}") as stream:
        await stream.started()
        kafka.produce(topic, serialize(topic, first))
        kafka.produce(topic, serialize(topic, second))
        await stream.read_messages(2)
    # The canonical proto3 JSON mapping: lowerCamel names, enums by name, int64 as strings, defaults left out.
    assert [json.loads(data) for data in stream.data] == [
        {
            "id": "m1",
            "home": {"name": "Lions", "goals": 2},
            "scorers": ["Ada", "Bo"],
            "minute": 42,
            "status": "LIVE",
            "attendance": "40123",
        },
        {"id": "m2", "note": "postponed"},
    ]


async def test_json_schema_wire_format_arrives_as_json(client, kafka, route, registry) -> None:
    from streams.services import topic_upsert

    topic = kafka.topic()
    topic_upsert(name=topic, value_format="jsonschema", registry=registry.registry.url)
    route(path="/s/js/{topic}", topic="${params.topic}", heartbeat_seconds=QUIET)
    schema = {"type": "object", "properties": {"match": {"type": "string"}, "minute": {"type": "integer"}}}
    serialize = serializer("jsonschema", registry, schema)
    async with open_stream(client, f"/s/js/{topic}") as stream:
        await stream.started()
        kafka.produce(topic, serialize(topic, {"match": "m1", "minute": 12}))
        await stream.read_messages(1)
    assert stream.data == ['{"match":"m1","minute":12}']


async def test_avro_key_filters_resumes_and_deletes(client, kafka, route, registry) -> None:
    from streams.services import topic_upsert

    topic = kafka.topic()
    topic_upsert(name=topic, value_format="avro", key_format="avro", registry=registry.registry.url)
    route(
        path="/s/keyed/{topic}/{id}",
        topic="${params.topic}",
        filters=[{"key": "${params.id}"}],
        event_id="key",
        heartbeat_seconds=QUIET,
    )
    key_of = serializer("avro", registry, "string", part="key")
    value_of = serializer("avro", registry, SCORE_AVRO)
    keys = {name: key_of(topic, name) for name in ("m1", "m2")}
    async with open_stream(client, f"/s/keyed/{topic}/m1") as stream:
        await stream.started()
        for n in range(4):
            kafka.produce(topic, value_of(topic, {"n": n, "note": None}), key=keys["m1" if n % 2 == 0 else "m2"])
        await stream.read_messages(2)
    assert stream.data == ['{"n":0,"note":null}', '{"n":2,"note":null}']
    last = stream.messages[-1]
    assert last.id is not None
    # The key-form id keeps the raw key bytes (Confluent header and all).
    assert event_id_parse(last.id).key == keys["m1"]

    # A resume from the first event's id replays what came after it, once.
    first_id = stream.messages[0].id
    assert first_id is not None
    kafka.produce(topic, value_of(topic, {"n": 4, "note": "late"}), key=keys["m1"])
    kafka.produce(topic, None, key=keys["m1"])  # a tombstone
    async with open_stream(client, f"/s/keyed/{topic}/m1", headers={"Last-Event-ID": first_id}) as resumed:
        await resumed.read_until(lambda s: any(e.type == "delete" for e in s.events))
    assert resumed.data[:2] == ['{"n":2,"note":null}', '{"n":4,"note":"late"}']
    delete = resumed.messages[2]
    assert delete.type == "delete"
    assert delete.data == b64url_encode(keys["m1"])
    assert len(resumed.messages) == 3


async def test_registry_outage_delays_and_loses_nothing(client, kafka, route, registry) -> None:
    """The registry is stopped for 10 s while 1,000 Avro records flow: all arrive, in order, afterwards."""
    from streams.services import topic_upsert

    topic = kafka.topic()
    topic_upsert(name=topic, value_format="avro", registry=registry.registry.url)
    route(path="/s/outage/{topic}", topic="${params.topic}", heartbeat_seconds=1)
    serialize = serializer("avro", registry, SCORE_AVRO)
    values = [serialize(topic, {"n": n, "note": None}) for n in range(1000)]  # registered before the outage
    unknown_id = b"\x00" + (424242).to_bytes(4, "big") + values[0][5:]
    async with open_stream(client, f"/s/outage/{topic}") as stream:
        await stream.started()
        registry.stop()
        stopped = time.monotonic()
        for n, value in enumerate(values):
            kafka.produce(topic, value, flush=False)
            if n == 500:
                kafka.produce(topic, unknown_id, flush=False)
        kafka.flush()
        # The gateway has the records but not their schema: delivery waits, and says so.
        assert await metric_wait(client, "sluice_registry_waiting", topic, lambda v: v == 1, within=WAIT) == 1
        beats_before = stream.raw.count(b":\n\n")
        await stream.read_until(lambda s: s.raw.count(b":\n\n") > beats_before + 2)  # heartbeats go on meanwhile
        assert stream.messages == []
        # Ten seconds of outage, read as they pass (heartbeats each second): no event meanwhile.
        await stream.read_until(lambda s: bool(s.messages) or time.monotonic() - stopped >= 10)
        assert stream.messages == []
        registry.start()
        await stream.read_messages(1000)
    assert [json.loads(data)["n"] for data in stream.data] == list(range(1000))
    assert await metric_wait(client, "sluice_undecodable_records_total", topic, lambda v: v == 1, within=WAIT) == 1
