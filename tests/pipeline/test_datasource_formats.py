"""The Kafka source's value decoding, without Spark: formats from options, skipped records, registry outages."""

from __future__ import annotations

import io
import json
import logging
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pytest

from pipeline import value_decoding
from pipeline.sources import source_stream
from pipeline.spec import PipelineError, PipelineSpec
from pipeline.value_decoding import ValueDecoding, value_formats
from streams.core.formats.registry import RegistryUnavailable
from streams.core.formats.spec import FormatError
from streams.core.retry import RetryPolicy
from tests.support.kafka_messages import FakeMessage
from tests.support.schema_registry import registry_running

SCHEMA = {"type": "record", "name": "Score", "fields": [{"name": "match", "type": "string"}]}


def Message(value: bytes | None, offset: int) -> FakeMessage:
    return FakeMessage(value, key=b"k", offset=offset, partition=2)


def avro_inline(value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), value)
    return out.getvalue()


def test_values_decode_and_the_ones_that_do_not_are_skipped_and_noted(tmp_path: Path) -> None:
    notes = tmp_path / "skipped.jsonl"
    options = {"value.format": "avro-inline", "value.avro_schema": json.dumps(SCHEMA), "skip_log": str(notes)}
    messages = [
        Message(avro_inline({"match": "m1"}), 0),
        Message(b"\x02", 1),  # a string of length 1 with no bytes after it
        Message(None, 2),  # a tombstone stays one
        Message(avro_inline({"match": "m3"}), 3),
        Message(b"\x09", 4),
    ]
    decoding = ValueDecoding(options, "raw", 2)
    assert [decoding.value(m, m.offset()) for m in messages] == [
        (True, b'{"match":"m1"}'),
        (False, None),
        (True, None),
        (True, b'{"match":"m3"}'),
        (False, None),
    ]
    decoding.note()
    [note] = [json.loads(line) for line in notes.read_text().splitlines()]
    assert {k: note[k] for k in ("topic", "partition", "skipped", "first", "last")} == {
        "topic": "raw",
        "partition": 2,
        "skipped": 2,
        "first": 1,
        "last": 4,
    }
    assert note["reason"].startswith("avro-inline:")


def test_text_and_json_values_are_read_as_they_are() -> None:
    assert value_formats({}) is None
    assert value_formats({"value.format": "json"}) is None
    assert ValueDecoding({"value.format": "text"}, "raw", 0).value(Message(b"\xff", 0), 0) == (True, b"\xff")


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"value.format": "xml"}, "value.format"),
        ({"value.format": "avro"}, "registry"),
        ({"value.format": "avro-inline"}, "value.avro_schema"),
        ({"value.format": "avro-inline", "value.avro_schema": '{"type": "nope"}'}, "value.avro_schema"),
    ],
)
def test_a_value_format_that_cannot_work_names_its_option(options: dict[str, str], option: str) -> None:
    with pytest.raises(FormatError) as error:
        value_formats(options)
    assert error.value.field == option


def test_a_registry_outage_is_waited_out_never_skipped(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    monkeypatch.setattr(value_decoding, "REGISTRY_RETRY", RetryPolicy((RegistryUnavailable,), 0.05, 0.2))
    with registry_running() as server:
        serialize = AvroSerializer(SchemaRegistryClient({"url": server.registry.url}), json.dumps(SCHEMA))
        data = bytes(serialize({"match": "m1"}, SerializationContext("raw", MessageField.VALUE)))
        decoding = ValueDecoding({"value.format": "avro", "registry": server.registry.url}, "raw", 2)
        server.stop()
        back = threading.Timer(1.0, server.start)
        back.start()
        try:
            with caplog.at_level(logging.WARNING, logger="sluice.pipeline"):
                assert decoding.value(Message(data, 5), 5) == (True, b'{"match":"m1"}')
        finally:
            back.join()
    assert decoding.skipped == 0
    waits = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert waits
    assert all("topic raw partition 2 offset 5: registry " in w for w in waits)


@pytest.mark.django_db
def test_the_runner_takes_the_value_format_of_the_source_topics_row(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipeline.runner import source_formats
    from streams.services import cluster_upsert, topic_upsert

    assert source_formats("no-row").value.name == "text"
    cluster_upsert(name="east", bootstrap_servers="east:9092", registry="https://${env.SR_USER}@sr.example.com")
    topic_upsert(name="raw", cluster="east", value_format="avro", key_format="avro-inline", key_avro_schema=SCHEMA)
    monkeypatch.delenv("SR_USER", raising=False)
    with pytest.raises(PipelineError, match=r"source topic raw: .*SR_USER"):
        source_formats("raw")
    monkeypatch.setenv("SR_USER", "sluice")
    formats = source_formats("raw")
    # The cluster's registry as written (the workers resolve it); keys are read as they are.
    assert (formats.value.name, formats.key.name) == ("avro", "text")
    assert formats.registry == "https://${env.SR_USER}@sr.example.com"


def test_spark_kafka_format_refuses_a_value_format_it_cannot_decode() -> None:
    spec = PipelineSpec(
        name="p", bootstrap="b:9092", json_schema={}, sink_topic="s", checkpoint_location="c", source_topic="raw"
    )
    with pytest.raises(PipelineError, match="--kafka-format python"):
        source_stream(None, replace(spec, value_format="avro", registry="http://sr"), "kafka")
