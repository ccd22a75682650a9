"""Record formats (SPEC 8): each decoder on real serializers' bytes, and what a failure means for the record."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

import fastavro
import pytest

from streams.core.formats.decoders import field_decoder
from streams.core.formats.jsontext import json_compact, key_text
from streams.core.formats.record import RecordDecoder
from streams.core.formats.registry import RegistryUnavailable, Undecodable, registry_failure
from streams.core.formats.spec import FieldFormat, FormatError, RecordFormats, registry_problem, registry_redacted
from tests.support.kafka_messages import FakeMessage as Message
from tests.support.schema_registry import RegistryServer, registry_running


@pytest.fixture
def registry() -> Iterator[RegistryServer]:
    with registry_running() as server:
        yield server


def avro_bytes(registry: RegistryServer, schema: Any, value: Any, topic: str = "t") -> bytes:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry.registry.url}), json.dumps(schema))
    return bytes(serialize(value, SerializationContext(topic, MessageField.VALUE)))


def test_json_compact_maps_avro_logical_types() -> None:
    value = {
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "day": datetime.date(2026, 1, 2),
        "price": decimal.Decimal("1.10"),
        "raw": b"\x01\x02",
        "id": uuid.UUID(int=1),
        "text": "é",
    }
    assert (
        json_compact(value)
        == (
            '{"when":"2026-01-02T03:04:05Z","day":"2026-01-02","price":"1.10","raw":"AQI=",'
            '"id":"00000000-0000-0000-0000-000000000001","text":"é"}'
        ).encode()
    )


def test_key_text_is_a_string_keys_text_and_anything_elses_json() -> None:
    assert key_text("m1") == b"m1"
    assert key_text(42) == b"42"
    assert key_text({"id": "m1"}) == b'{"id":"m1"}'


def test_text_topics_decode_nothing() -> None:
    decoder = RecordDecoder("t", RecordFormats(), {})
    record = decoder.record(Message(b"\xff raw", key=b"k"))
    assert (record.value, record.key, record.match_key, record.problem) == (b"\xff raw", b"k", b"k", None)


def test_json_values_are_checked_and_passed_as_written() -> None:
    decoder = RecordDecoder("t", RecordFormats.of("json"), {})
    assert decoder.record(Message(b'{"a": 1}')).value == b'{"a": 1}'
    bad = decoder.record(Message(b"{not json"))
    assert bad.problem is not None
    assert bad.problem.startswith("not JSON")
    assert bad.body() is None  # never sent


def test_avro_inline_values_and_keys() -> None:
    schema = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "string"}]}
    formats = RecordFormats.of("avro-inline", "avro-inline", value_schema=schema, key_schema=schema)
    encoded = io.BytesIO()
    fastavro.schemaless_writer(encoded, fastavro.parse_schema(schema), {"id": "m1"})
    record = RecordDecoder("t", formats, {}).record(Message(encoded.getvalue(), key=encoded.getvalue()))
    assert record.value == b'{"id":"m1"}'
    assert record.match_key == b'{"id":"m1"}'
    assert record.key == encoded.getvalue()  # ids and delete events keep the raw key


LONGS = {"type": "record", "name": "L", "fields": [{"name": "big", "type": "long"}, {"name": "s", "type": "string"}]}


@pytest.mark.parametrize(
    ("body", "read"),
    [
        (b"\xfe" + b"\xff" * 8 + b"\x01" + b"\x00", b'{"big":9223372036854775807,"s":""}'),  # 10 bytes, 2**63 - 1
        (b"\xff" * 9 + b"\x01" + b"\x00", b'{"big":-9223372036854775808,"s":""}'),  # 10 bytes, -2**63
        (b"\x80\x80\x00" + b"\x00", b'{"big":0,"s":""}'),  # longer than needed, within 10 bytes: its value
        # "中文中文" is twelve bytes with the high bit set, read where a long varint could be
        (b"\x02\x18" + "中文中文".encode(), '{"big":1,"s":"中文中文"}'.encode()),
        # with that text, the compiled read is confirmed by writing the value back: these bytes are not
        (b"\x80\x80\x00\x18" + "中文中文".encode(), '{"big":0,"s":"中文中文"}'.encode()),  # padded: its value
        (b"\x80" * 9 + b"\x04\x18" + "中文中文".encode(), None),  # wrapped to 0 by the compiled reader
        (b"\x80" * 9 + b"\x04" + b"\x00", None),  # 2**65 zigzagged: fastavro's compiled reader reads 0
        (b"\x80" * 10 + b"\x02" + b"\x00", None),  # 11 bytes: it reads 64
        (b"\x80" * 10 + b"\x00" + b"\x00", None),  # 11 bytes, value 0
        (b"\x02\x80\x80\x80\x80\x80\x80\x80\x80\x80\x02", None),  # a string's length beyond 64 bits
        (b"\x80" * 5, None),  # cut short
    ],
)
def test_avro_varints_are_64_bit_longs_or_the_record_is_skipped(body: bytes, read: bytes | None) -> None:
    record = RecordDecoder("t", RecordFormats.of("avro-inline", value_schema=LONGS), {}).record(Message(body))
    if read is None:
        assert record.problem is not None
        assert record.problem.startswith("avro-inline: ")
    else:
        assert (record.problem, record.value) == (None, read)


def test_avro_inline_needs_a_real_schema() -> None:
    with pytest.raises(FormatError) as missing:
        RecordFormats.of("avro-inline")
    assert missing.value.field == "value_avro_schema"
    with pytest.raises(FormatError) as wrong:
        RecordFormats.of("text", "avro-inline", key_schema={"type": "no-such-type"})
    assert wrong.value.field == "key_avro_schema"


def test_unknown_format_names_its_field() -> None:
    with pytest.raises(FormatError) as error:
        RecordFormats.of("xml")
    assert error.value.field == "value_format"
    assert "avro" in str(error.value)


def test_registry_formats_need_a_registry() -> None:
    with pytest.raises(FormatError) as error:
        field_decoder(FieldFormat("avro"), "t", "value", "")
    assert error.value.field == "registry"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://registry.example.com", None),
        ("https://${env.SR_USER}:${env.SR_PASSWORD}@registry.example.com", None),
        ("https://sluice:${env.SR_PASSWORD}@registry.example.com:8081/ctx", None),
        ("https://sluice:hunter2@registry.example.com", "secret"),
        ("registry.example.com", "http"),
        ("ftp://registry.example.com", "http"),
    ],
)
def test_registry_addresses(url: str, problem: str | None) -> None:
    found = registry_problem(url)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_registry_redacted_drops_credentials() -> None:
    assert registry_redacted("https://${env.U}:${env.P}@sr.example.com/x") == "https://sr.example.com/x"
    assert registry_redacted("http://127.0.0.1:8081") == "http://127.0.0.1:8081"


def test_registry_url_resolves_references_at_connect_time() -> None:
    formats = RecordFormats.of("avro", registry="https://${env.SR_USER}:${env.SR_PASSWORD}@sr.example.com")
    assert formats.registry_url({"SR_USER": "u", "SR_PASSWORD": "p"}) == "https://u:p@sr.example.com"


def test_avro_from_the_registry(registry: RegistryServer) -> None:
    schema = {
        "type": "record",
        "name": "Score",
        "fields": [
            {"name": "n", "type": "int"},
            {"name": "odds", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}},
            {"name": "note", "type": ["null", "string"]},
        ],
    }
    data = avro_bytes(registry, schema, {"n": 1, "odds": decimal.Decimal("2.50"), "note": "x"})
    decoder = RecordDecoder("t", RecordFormats.of("avro", registry=registry.registry.url), {})
    assert decoder.record(Message(data)).value == b'{"n":1,"odds":"2.50","note":"x"}'
    requests = len(registry.registry.requests)
    for offset in range(5):
        assert decoder.record(Message(data, offset=offset)).problem is None
    assert len(registry.registry.requests) == requests  # the schema is cached by id


def test_unknown_schema_id_and_bad_bytes_are_undecodable(registry: RegistryServer, caplog) -> None:
    schema = {"type": "record", "name": "S", "fields": [{"name": "n", "type": "int"}]}
    data = avro_bytes(registry, schema, {"n": 1})
    decoder = RecordDecoder("t", RecordFormats.of("avro", registry=registry.registry.url), {})
    unknown = decoder.record(Message(b"\x00" + (999_999).to_bytes(4, "big") + data[5:], offset=3))
    assert unknown.problem is not None
    assert "404" in unknown.problem
    assert decoder.record(Message(b"plain text", offset=4)).problem is not None
    assert decoder.record(Message(data[:5] + b"\xff\xff\xff", offset=5)).problem is not None
    lines = [r.getMessage() for r in caplog.records if r.name == "sluice.formats"]
    assert len(lines) == 1  # rate-limited: the first names where, the next ones are counted
    assert "topic=t partition=0 offset=3" in lines[0]


def test_registry_down_is_an_outage_not_a_bad_record(registry: RegistryServer) -> None:
    schema = {"type": "record", "name": "S", "fields": [{"name": "n", "type": "int"}]}
    data = avro_bytes(registry, schema, {"n": 1})
    decoder = RecordDecoder("t", RecordFormats.of("avro", registry=registry.registry.url), {})
    registry.stop()
    with pytest.raises(RegistryUnavailable):
        decoder.record(Message(data))
    registry.start()
    assert decoder.record(Message(data)).value == b'{"n":1}'


def test_registry_failures_classified() -> None:
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    assert isinstance(registry_failure(SchemaRegistryError(404, 40403, "Schema not found"), "http://r"), Undecodable)
    assert isinstance(registry_failure(SchemaRegistryError(503, 50003, "busy"), "http://r"), RegistryUnavailable)
    assert isinstance(registry_failure(SchemaRegistryError(429, 429, "slow down"), "http://r"), RegistryUnavailable)
    assert isinstance(registry_failure(ConnectionRefusedError(), "http://u:p@r"), RegistryUnavailable)
    assert "u:p" not in str(registry_failure(ConnectionRefusedError(), "http://u:p@r"))


def test_protobuf_by_schema_id_and_message_index(registry: RegistryServer) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.support.protobuf_messages import Heartbeat, Match

    client = SchemaRegistryClient({"url": registry.registry.url})
    context = SerializationContext("t", MessageField.VALUE)
    match = ProtobufSerializer(Match, client, {"use.deprecated.format": False})(
        Match(id="m1", note="kick-off", status=Match.FINISHED), context
    )
    beat = ProtobufSerializer(Heartbeat, client, {"use.deprecated.format": False})(Heartbeat(source="s"), context)
    decoder = RecordDecoder("t", RecordFormats.of("protobuf", registry=registry.registry.url), {})
    assert decoder.record(Message(match)).value == b'{"id":"m1","note":"kick-off","status":"FINISHED"}'
    assert decoder.record(Message(beat)).value == b'{"source":"s"}'


def jsonschema_wire(registry: RegistryServer, body: bytes, schema: Any = None) -> bytes:
    schema_id = registry.registry.register_text("t-value", json.dumps(schema or {"type": "object"}), "JSON")
    return b"\x00" + schema_id.to_bytes(4, "big") + body


@pytest.mark.parametrize(
    ("body", "out"),
    [
        (b'{"n":18446744073709551616}', b'{"n":18446744073709551616}'),
        (b'{"f":1e400}', b'{"f":1e400}'),
        (b'{ "d": 0.1000000000000000000001, "s": "a \\" b" }', b'{"d":0.1000000000000000000001,"s":"a \\" b"}'),
        (b'{"n": -9223372036854775809, "x": 1.50}', b'{"n":-9223372036854775809,"x":1.50}'),
    ],
)
def test_json_numbers_keep_their_text(registry: RegistryServer, body: bytes, out: bytes) -> None:
    schema = RecordDecoder("t", RecordFormats.of("jsonschema", registry=registry.registry.url), {})
    assert schema.record(Message(jsonschema_wire(registry, body))).value == out
    plain = RecordDecoder("t", RecordFormats.of("json", "json"), {}).record(Message(body, key=body))
    assert (plain.value, plain.match_key, plain.problem) == (body, out, None)


def test_json_constants_and_bad_utf8_are_not_json() -> None:
    decoder = RecordDecoder("t", RecordFormats.of("json"), {})
    for body in (b"[NaN]", b"Infinity", b'{"s":"\xff"}', b"[" * 5000 + b"]" * 5000):
        assert decoder.record(Message(body)).problem is not None


def test_a_schema_of_another_kind_is_not_read(registry: RegistryServer) -> None:
    # {"type": "string"} is JSON Schema here, and also valid Avro: an Avro record naming it is skipped.
    wire = jsonschema_wire(registry, b"\x06abc", {"type": "string"})
    record = RecordDecoder("t", RecordFormats.of("avro", registry=registry.registry.url), {}).record(Message(wire))
    assert record.problem is not None
    assert "is JSON, not AVRO" in record.problem


def test_avro_bodies_end_with_their_value_and_deep_nesting_is_skipped(registry: RegistryServer) -> None:
    node = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    data = avro_bytes(registry, node, {"next": {"next": None}})
    decoder = RecordDecoder("t", RecordFormats.of("avro", registry=registry.registry.url), {})
    assert decoder.record(Message(data)).value == b'{"next":{"next":null}}'
    assert (
        decoder.record(Message(data + b"\x00")).problem
        == f"avro (schema {int.from_bytes(data[1:5], 'big')}): bytes after the value"
    )
    # fastavro's compiled reader crashes the process on this; the Python reader's depth is bounded.
    deep = decoder.record(Message(data[:5] + b"\x02" * 100_000 + b"\x00"))
    assert deep.problem is not None
    assert "RecursionError" in deep.problem


def test_protobuf_indexes_name_one_message_or_none(registry: RegistryServer) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.support.protobuf_messages import Heartbeat

    client = SchemaRegistryClient({"url": registry.registry.url})
    beat = ProtobufSerializer(Heartbeat, client, {"use.deprecated.format": False})(
        Heartbeat(source="s"), SerializationContext("t", MessageField.VALUE)
    )
    decoder = RecordDecoder("t", RecordFormats.of("protobuf", registry=registry.registry.url), {})
    head, body = beat[:5], beat[6:]  # the serializer writes index [0] as a single 0
    assert decoder.record(Message(head + b"\x00" + body)).value == b'{"source":"s"}'
    for indexes in (b"\x02\x01", b"\x02\x05", b"\x02\x80\x80", b"\xff\xff\xff\xff\x0f"):  # [-1], [-3], unended, huge
        record = decoder.record(Message(head + indexes + body))
        assert record.problem is not None, indexes
    guid = decoder.record(Message(b"\x01" + bytes(16) + b"\x00" + body))
    assert guid.problem is not None  # looked up by GUID, which this registry does not know


def test_an_unexpected_decoder_error_skips_the_record() -> None:
    decoder = RecordDecoder("t", RecordFormats.of("json"), {})

    def broken(data: bytes) -> Any:
        raise TypeError("Integer exceeds 64-bit range")

    decoder._value, decoder._value_passes = broken, False
    record = decoder.record(Message(b"1"))
    assert record.problem == "TypeError: Integer exceeds 64-bit range"
