"""Record decoders under hostile bytes: every record decodes as exactly what its header names, or is skipped.

For each format a record is built from a header (magic byte, schema id or GUID,
Protobuf message indexes) and a body (a real encoding, truncated, over-long, deeply
nested, invalid UTF-8, numbers at and beyond 64 bits, or noise), then given to
:meth:`RecordDecoder.record`, the entry a hub's fetch thread calls. Properties:

- nothing escapes it (a :class:`RegistryUnavailable` cannot: the registry is up);
- the record is skipped with its reason (``problem``: the hub counts it as
  undecodable), or its value is what a reference reader, written here, reads with
  the schema and message the header names: never another schema or message.

confluent-kafka's own deserializers read the same bytes; where they answer
differently the case is counted (shown at the end of the run) and asserted to be
one of the differences docs/formats.md explains.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fastavro
import pytest
from fastavro import _read_py
from fastavro.io.binary_decoder import BinaryDecoder
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.core.formats.jsontext import json_compact
from streams.core.formats.record import RecordDecoder
from streams.core.formats.spec import RecordFormats
from tests.fuzz.conftest import TRIED
from tests.support.kafka_messages import FakeMessage
from tests.support.schema_registry import registry_running

# At least this many examples per test (the "deep" profile tries more).
EXAMPLES = settings(max_examples=max(400, settings.default.max_examples))

AVRO_SCORE = {
    "type": "record",
    "name": "Score",
    "fields": [
        {"name": "n", "type": "int"},
        {"name": "big", "type": "long"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "ratio", "type": "double"},
    ],
}
AVRO_OTHER = {
    "type": "record",
    "name": "Other",
    "fields": [
        {"name": "raw", "type": "bytes"},
        {"name": "side", "type": {"type": "enum", "name": "Side", "symbols": ["L", "R"]}},
    ],
}
AVRO_NODE = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
JSON_SCHEMAS = [
    {"type": "object", "properties": {"n": {"type": "integer"}}},
    {"type": "array", "items": {"type": "number"}},
    {"type": "string"},  # also a valid Avro schema's text: must not be read as Avro
]
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


@dataclass
class Registry:
    url: str
    avro: dict[int, Any]  # id: parsed schema
    json: set[int]
    protobuf: int
    protobuf_messages: dict[tuple[int, ...], Any]
    unknown: int
    client: Any

    @property
    def ids(self) -> list[int]:
        return [*self.avro, *self.json, self.protobuf, self.unknown, 0]


@pytest.fixture(scope="module")
def registry() -> Iterator[Registry]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf.message_factory import GetMessageClass

    from tests.support.protobuf_messages import Heartbeat, Match

    with registry_running() as server:
        fake = server.registry
        avro = {}
        for subject, schema in (("t-value", AVRO_SCORE), ("other-value", AVRO_OTHER), ("t-value", AVRO_NODE)):
            avro[fake.register_text(subject, json.dumps(schema), "AVRO")] = fastavro.parse_schema(schema)
        json_ids = {fake.register_text("t-value", json.dumps(schema), "JSON") for schema in JSON_SCHEMAS}
        client = SchemaRegistryClient({"url": fake.url})
        ProtobufSerializer(Match, client, {"use.deprecated.format": False})(
            Match(id="m"), SerializationContext("t", MessageField.VALUE)
        )
        protobuf = max(fake.by_id)
        team = GetMessageClass(Match.DESCRIPTOR.nested_types_by_name["Team"])
        yield Registry(
            fake.url, avro, json_ids, protobuf, {(0,): Heartbeat, (1,): Match, (1, 0): team}, 999_999, client
        )


def decoder(registry: Registry, value_format: str, key_format: str = "text", **schemas: Any) -> RecordDecoder:
    return RecordDecoder("t", RecordFormats.of(value_format, key_format, registry=registry.url, **schemas), {})


# -- bytes ----------------------------------------------------------------------------


def zigzag(number: int) -> bytes:
    """A zigzag varint of any size (beyond 64 bits too, as a hostile producer may write it)."""
    encoded = number * 2 if number >= 0 else -number * 2 - 1
    out = bytearray()
    while encoded > 0x7F:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


def body_mutated(draw: Any, body: bytes) -> bytes:
    how = draw(st.sampled_from(["as is", "as is", "truncated", "longer", "flipped", "noise", "empty"]))
    if how == "truncated" and body:
        return body[: draw(st.integers(0, len(body) - 1))]
    if how == "longer":
        return body + draw(st.binary(min_size=1, max_size=16))
    if how == "flipped" and body:
        at = draw(st.integers(0, len(body) - 1))
        return body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1 :]
    if how == "noise":
        return draw(st.binary(max_size=64))
    if how == "empty":
        return b""
    return body


@st.composite
def header(draw: Any, ids: list[int]) -> bytes:
    """A Confluent header: magic 0 and an id (known, of another kind or subject, unknown), or something else."""
    kind = draw(st.sampled_from(["id", "id", "id", "guid", "magic", "short"]))
    if kind == "guid":
        return b"\x01" + uuid.UUID(int=draw(st.integers(0, 2**128 - 1))).bytes
    if kind == "magic":
        return bytes([draw(st.integers(2, 255))]) + struct.pack(">I", draw(st.sampled_from(ids)))
    schema_id = draw(st.one_of(st.sampled_from(ids), st.integers(0, 2**32 - 1)))
    full = b"\x00" + struct.pack(">I", schema_id)
    return full[: draw(st.integers(0, 4))] if kind == "short" else full


def header_id(data: bytes) -> tuple[int | None, bytes]:
    """The id a magic-0 header names and the rest (None: not a magic-0 header)."""
    if len(data) < 5 or data[0] != 0:
        return None, b""
    return struct.unpack(">I", data[1:5])[0], data[5:]


# -- JSON -----------------------------------------------------------------------------

big_numbers = st.sampled_from(
    [
        "18446744073709551616",
        "-9223372036854775809",
        "9223372036854775807",
        "1e400",
        "-1E-400",
        "0.1000000000000000000001",
        "123456789012345678901234567890.5",
        "1.50",
        "1e5",
    ]
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(LONG_MIN * 4, LONG_MAX * 4).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    big_numbers,
    st.text(max_size=8),
)


def json_rendered(value: Any, gap: str) -> str:
    """JSON text with ``gap`` between tokens; numbers are strings of their text here."""
    if isinstance(value, list):
        return "[" + gap + ("," + gap).join(json_rendered(v, gap) for v in value) + gap + "]"
    if isinstance(value, dict):
        inner = ("," + gap).join(json.dumps(k) + gap + ":" + gap + json_rendered(v, gap) for k, v in value.items())
        return "{" + gap + inner + gap + "}"
    if isinstance(value, str) and value[:1] not in ("", "-") and not value[0].isdigit():
        return json.dumps(value)
    if isinstance(value, str) and value and (value[0].isdigit() or value[0] == "-"):
        return value if _is_number(value) else json.dumps(value)
    return json.dumps(value)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return not any(c.isalpha() and c not in "eE" for c in text)


@st.composite
def json_bodies(draw: Any) -> bytes:
    """JSON text: generated documents with whitespace and big numbers, deep nesting, or broken bytes."""
    kind = draw(st.sampled_from(["document", "document", "deep", "bad utf-8", "surrogate", "constant"]))
    if kind == "deep":
        depth = draw(st.sampled_from([10, 500, 1025, 5000, 100_000]))
        return b"[" * depth + b"]" * depth
    if kind == "bad utf-8":
        return b'{"s":"' + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"])) + b'"}'
    if kind == "surrogate":
        return b'["\\ud800",1]'
    if kind == "constant":
        return draw(st.sampled_from([b"[NaN]", b"Infinity", b"-Infinity"]))
    document = draw(
        st.recursive(
            json_scalars,
            lambda inner: st.one_of(
                st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
            ),
            max_leaves=12,
        )
    )
    gap = draw(st.sampled_from(["", " ", "\n\t ", "\r\n"]))
    return body_mutated(draw, json_rendered(document, gap).encode("utf-8", "surrogatepass"))


def _constant(name: str) -> Any:
    raise ValueError(name)


NOT_JSON = object()


def json_reference(data: bytes) -> Any:
    """The document with every number as its text (``NOT_JSON``), by the standard library."""
    try:
        return json.loads(data.decode("utf-8"), parse_int=str, parse_float=str, parse_constant=_constant)
    except (ValueError, RecursionError):
        return NOT_JSON


def json_squeezed(data: bytes) -> bytes:
    """``data`` without whitespace outside strings, character by character."""
    out, in_string, escaped = bytearray(), False, False
    for byte in data:
        if escaped:
            escaped = False
        elif in_string:
            escaped = byte == 0x5C
            in_string = byte != 0x22
        elif byte in b" \t\n\r":
            continue
        else:
            in_string = byte == 0x22
        out.append(byte)
    return bytes(out)


@EXAMPLES
@given(json_bodies(), json_bodies())
def test_json_values_pass_as_written_and_keys_compacted(registry: Registry, value: bytes, key: bytes) -> None:
    TRIED["decoders: json"] += 1
    record = decoder(registry, "json", "json").record(FakeMessage(value, key=key))
    value_ok, key_ok = json_reference(value) is not NOT_JSON, json_reference(key) is not NOT_JSON
    assert (record.problem is None) == (value_ok and key_ok), record.problem
    if record.problem is None:
        assert record.value == value
        assert record.match_key == (key_reference(key))


def key_reference(key: bytes) -> bytes:
    reference = json_reference(key)
    if isinstance(reference, str) and json_squeezed(key).startswith(b'"'):
        return reference.encode("utf-8", "surrogatepass")
    return json_squeezed(key)


@EXAMPLES
@given(st.data())
def test_jsonschema_reads_only_json_schema_ids_and_keeps_the_text(registry: Registry, data: Any) -> None:
    TRIED["decoders: jsonschema"] += 1
    wire = data.draw(header(registry.ids)) + data.draw(json_bodies())
    record = decoder(registry, "jsonschema").record(FakeMessage(wire))
    schema_id, body = header_id(wire)
    expected = json_reference(body) if schema_id in registry.json else NOT_JSON
    assert (record.problem is None) == (expected is not NOT_JSON), record.problem
    if record.problem is None:
        assert record.value == json_squeezed(body)
    theirs = confluent_read(registry, "jsonschema", wire)
    if theirs is not _FAILED and record.problem is None:
        same = rendered(theirs) == record.value
        DIFFERENT[("jsonschema", "same" if same else "they re-render the numbers or escapes")] += 1
    elif record.problem is None:
        DIFFERENT[("jsonschema", "they skip, we read: a number orjson cannot hold or a lone surrogate")] += 1
    elif theirs is not _FAILED:
        DIFFERENT[("jsonschema", "they read, we skip: " + why_skipped(record.problem))] += 1


# -- Avro -----------------------------------------------------------------------------

longs = st.one_of(st.integers(LONG_MIN, LONG_MAX), st.sampled_from([LONG_MIN, LONG_MAX, 0, -1]))


def avro_values(parsed_name: str) -> st.SearchStrategy[Any]:
    if parsed_name == "Score":
        return st.fixed_dictionaries(
            {
                "n": st.integers(-(2**31), 2**31 - 1),
                "big": longs,
                "note": st.one_of(st.none(), st.text(max_size=8)),
                "tags": st.lists(st.text(max_size=4), max_size=3),
                "ratio": st.floats(allow_nan=False),
            }
        )
    if parsed_name == "Other":
        return st.fixed_dictionaries({"raw": st.binary(max_size=8), "side": st.sampled_from(["L", "R"])})
    return st.integers(0, 50).map(lambda depth: _node(depth))


def _node(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"next": None}
    for _ in range(depth):
        node = {"next": node}
    return node


@st.composite
def avro_bodies(draw: Any, registry: Registry) -> bytes:
    """An Avro body: a value of one of the registered schemas, mutated, or a hostile one."""
    kind = draw(st.sampled_from(["value", "value", "value", "deep", "long varint", "huge length"]))
    if kind == "deep":
        return b"\x02" * draw(st.sampled_from([10, 900, 5000, 200_000])) + b"\x00"
    if kind == "long varint":  # an int or a long written in more than 10 bytes, or beyond 64 bits
        return zigzag(draw(st.sampled_from([2**31, 2**63, 2**64, -(2**70), 2**200]))) + draw(st.binary(max_size=8))
    if kind == "huge length":  # a string, bytes or array length no body holds
        return zigzag(0) + zigzag(0) + zigzag(1) + zigzag(draw(st.sampled_from([2**31, 2**62, -5]))) + b"x"
    parsed = draw(st.sampled_from(list(registry.avro.values())))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, draw(avro_values(parsed["name"])))
    return body_mutated(draw, out.getvalue())


class AvroLongs(BinaryDecoder):  # type: ignore[misc]
    """fastavro's Python decoder (varints of any length) with the Avro spec's long: 10 bytes, 64 bits at most."""

    def read_long(self) -> int:
        start = self.fo.tell()
        number = super().read_long()
        if self.fo.tell() - start > 10 or not LONG_MIN <= number <= LONG_MAX:
            raise ValueError("not an Avro long")
        return number

    read_int = read_long


def avro_reference(parsed: Any, body: bytes) -> bytes | None:
    """What fastavro's Python reader reads, rendered, if the body is exactly one value (None: skip it)."""
    payload = io.BytesIO(body)
    named: dict[str, Any] = {"writer": {}, "reader": {}}
    fastavro.parse_schema(parsed, named["writer"])
    try:
        value = _read_py.read_data(AvroLongs(payload), parsed, named, None, {})
        if payload.read(1):
            return None
        return json_compact(value)
    except Exception:  # EOFError, bad UTF-8, a bad union or enum index, RecursionError, beyond 64 bits
        return None


@EXAMPLES
@given(st.data())
def test_avro_reads_the_schema_its_header_names(registry: Registry, data: Any) -> None:
    TRIED["decoders: avro"] += 1
    wire = data.draw(header(registry.ids)) + data.draw(avro_bodies(registry))
    record = decoder(registry, "avro").record(FakeMessage(wire))
    schema_id, body = header_id(wire)
    expected = avro_reference(registry.avro[schema_id], body) if schema_id in registry.avro else None
    if expected is None:
        assert record.problem is not None
        reason = why_skipped(record.problem)
    else:
        assert record.problem is None, record.problem
        assert record.value == expected
        reason = ""
    deep = schema_id in registry.avro and registry.avro[schema_id]["name"] == "Node" and len(body) > 1000
    if deep:  # their compiled reader would crash this process
        DIFFERENT[("avro", "they crash the process, we skip: a value nested thousands deep")] += 1
        return
    theirs = confluent_read(registry, "avro", wire)
    ours_read = record.problem is None
    if theirs is _FAILED and not ours_read:
        return
    if theirs is not _FAILED and ours_read:
        assert json_compact(theirs) == record.value
        DIFFERENT[("avro", "same")] += 1
        return
    assert not ours_read, "we read what confluent-kafka refuses"
    DIFFERENT[("avro", "they read, we skip: " + reason)] += 1


@EXAMPLES
@given(st.data())
def test_avro_inline_reads_its_schema_and_nothing_more(registry: Registry, data: Any) -> None:
    TRIED["decoders: avro-inline"] += 1
    body = data.draw(avro_bodies(registry))
    record = decoder(registry, "avro-inline", value_schema=AVRO_SCORE).record(FakeMessage(body))
    expected = avro_reference(fastavro.parse_schema(AVRO_SCORE), body)
    assert (record.problem is None) == (expected is not None), record.problem
    if expected is not None:
        assert record.value == expected


# -- Protobuf -------------------------------------------------------------------------


@st.composite
def message_indexes(draw: Any) -> bytes:
    """The message-index array after a Protobuf header: named, empty, negative, huge, too long, unterminated."""
    kind = draw(
        st.sampled_from(["known", "known", "known", "empty", "negative", "huge", "too long", "unterminated", "other"])
    )
    if kind == "known":
        indexes = draw(st.sampled_from([(0,), (1,), (1, 0)]))
    elif kind == "empty":
        return zigzag(0)
    elif kind == "negative":
        indexes = draw(st.sampled_from([(-1,), (1, -1), (-2, 0)]))
    elif kind == "huge":
        indexes = (draw(st.sampled_from([2**31, 2**63, 2**64 + 1, 2**200])),)
    elif kind == "too long":
        return zigzag(draw(st.sampled_from([100_001, 2**40, -3])))
    elif kind == "unterminated":
        return zigzag(2) + zigzag(1) + b"\x80" * draw(st.integers(1, 12))
    else:
        indexes = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=4)))
    return zigzag(len(indexes)) + b"".join(zigzag(i) for i in indexes)


@st.composite
def protobuf_bodies(draw: Any, registry: Registry) -> bytes:
    kind = draw(st.sampled_from(["message", "message", "message", "deep", "long varint"]))
    if kind == "deep":  # groups of an unknown field 15 nested in each other
        depth = draw(st.sampled_from([10, 90, 200, 5000]))
        return b"\x7b" * depth + b"\x7c" * depth
    if kind == "long varint":  # field 8 (attendance, int64) written beyond 64 bits
        return b"\x40" + b"\xff" * draw(st.integers(9, 12)) + b"\x01"
    message_class = draw(st.sampled_from(list(registry.protobuf_messages.values())))
    message = message_class()
    name = message_class.DESCRIPTOR.name
    if name == "Match":
        message.id = draw(st.text(max_size=6))
        message.attendance = draw(longs)
        message.scorers.extend(draw(st.lists(st.text(max_size=4), max_size=3)))
        message.home.goals = draw(st.integers(-(2**31), 2**31 - 1))
    elif name == "Team":
        message.name = draw(st.text(max_size=6))
        message.goals = draw(st.integers(-(2**31), 2**31 - 1))
    else:
        message.source = draw(st.text(max_size=6))
    return body_mutated(draw, message.SerializeToString())


def protobuf_header_read(rest: bytes) -> tuple[tuple[int, ...] | None, bytes]:
    """The message indexes after the id (None: unreadable), and the body."""
    stream = io.BytesIO(rest)

    def varint() -> int | None:
        number, shift = 0, 0
        while True:
            byte = stream.read(1)
            if not byte:
                return None
            number |= (byte[0] & 0x7F) << shift
            shift += 7
            if not byte[0] & 0x80:
                return (number >> 1) ^ -(number & 1)

    size = varint()
    if size is None or size < 0 or size > 100_000:
        return None, b""
    indexes = []
    for _ in range(size):
        index = varint()
        if index is None:
            return None, b""
        indexes.append(index)
    return tuple(indexes) or (0,), stream.read()


def protobuf_reference(registry: Registry, indexes: tuple[int, ...] | None, body: bytes) -> bytes | None:
    from google.protobuf.json_format import MessageToDict

    message_class = registry.protobuf_messages.get(indexes or ())
    if message_class is None:
        return None
    try:
        return json_compact(MessageToDict(message_class.FromString(body)))
    except Exception:
        return None


@EXAMPLES
@given(st.data())
def test_protobuf_reads_the_message_its_header_names(registry: Registry, data: Any) -> None:
    TRIED["decoders: protobuf"] += 1
    head = data.draw(header([registry.protobuf] * 4 + registry.ids))
    wire = head + (data.draw(message_indexes()) if len(head) == 5 else b"") + data.draw(protobuf_bodies(registry))
    record = decoder(registry, "protobuf").record(FakeMessage(wire))
    schema_id, rest = header_id(wire)
    indexes, body = protobuf_header_read(rest) if schema_id == registry.protobuf else (None, b"")
    expected = protobuf_reference(registry, indexes, body)
    assert (record.problem is None) == (expected is not None), record.problem
    if expected is not None:
        assert record.value == expected
    theirs = confluent_read(registry, "protobuf", wire)
    if theirs is _FAILED:
        DIFFERENT[("protobuf", "same" if record.problem is not None else f"they skip, we read: {indexes}")] += 1
    elif record.problem is not None:
        DIFFERENT[("protobuf", "they read, we skip: " + why_skipped(record.problem))] += 1
    else:
        same = json_compact(theirs) == record.value
        DIFFERENT[("protobuf", "same" if same else "they read it as Match, the header names another message")] += 1


@EXAMPLES
@given(st.binary(max_size=64), st.one_of(st.none(), st.binary(max_size=16)))
def test_text_passes_every_byte(registry: Registry, value: bytes, key: bytes | None) -> None:
    TRIED["decoders: text"] += 1
    record = decoder(registry, "text").record(FakeMessage(value, key=key))
    assert (record.value, record.key, record.match_key, record.problem) == (value, key, key, None)


# -- confluent-kafka's deserializers on the same bytes ---------------------------------

_FAILED = object()
DIFFERENT: Any = TRIED.__class__()
_theirs: dict[str, Any] = {}


def confluent_read(registry: Registry, kind: str, wire: bytes) -> Any:
    """What confluent-kafka's deserializer makes of ``wire`` (``_FAILED``: it raises)."""
    from confluent_kafka.serialization import MessageField, SerializationContext

    deserializer = _theirs.get(kind)
    if deserializer is None:
        deserializer = _theirs[kind] = _deserializer(registry, kind)
    try:
        value = deserializer(wire, SerializationContext("t", MessageField.VALUE))
    except Exception:
        return _FAILED
    if kind == "protobuf":
        from google.protobuf.json_format import MessageToDict

        return MessageToDict(value)
    return value


def _deserializer(registry: Registry, kind: str) -> Any:
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer

    from tests.support.protobuf_messages import Match

    if kind == "avro":
        return AvroDeserializer(registry.client)
    if kind == "jsonschema":
        return JSONDeserializer(None, schema_registry_client=registry.client, conf={"validate": False})
    return ProtobufDeserializer(Match, {"use.deprecated.format": False})


def rendered(value: Any) -> bytes:
    """Compact JSON text of a parsed value; the standard library's past orjson's nesting limit (255)."""
    try:
        return json_compact(value)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


def why_skipped(problem: str) -> str:
    for words, reason in (
        ("bytes after the value", "bytes after the value"),
        ("is JSON, not", "schema of another kind"),
        ("is AVRO, not", "schema of another kind"),
        ("is PROTOBUF, not", "schema of another kind"),
        ("no message at index", "no such message index"),
        ("VarintOverflow", "a varint longer than 10 bytes or beyond 64 bits"),
        ("(HTTP 404)", "a schema id or GUID the registry does not know"),
    ):
        if words in problem:
            return reason
    return problem[:60]


@pytest.fixture(scope="module", autouse=True)
def _differences_shown() -> Iterator[None]:
    yield
    for (kind, what), count in sorted(DIFFERENT.items()):
        TRIED[f"vs confluent-kafka: {kind}: {what}"[:120]] += count
