"""One decoder per format: bytes in, a Python value out, on confluent-kafka's schema registry serdes.

Avro and Protobuf records are read as confluent-kafka's deserializers read them (the
header by its own parser, the writer schema fetched and built by its code, the body
by fastavro and by the message class), without the deserializers' per-record rule
and descriptor walks; JSON Schema records go through its ``JSONDeserializer``.

A decoder raises :class:`~streams.core.formats.registry.Undecodable` for bytes it
cannot read (or a schema id the registry does not know) and
:class:`~streams.core.formats.registry.RegistryUnavailable` when the registry does
not answer. Schemas are cached by id by the registry client, parsed Avro schemas by
the Avro deserializer, and Protobuf message classes are compiled once per schema
id and message index.

Hostile bytes are skipped, never read as something else: a Protobuf message index
must name a message of the schema (a negative one does not count from the end); an
Avro body is read by :class:`~streams.core.formats.avro.AvroBody` (one value, varints
within 64 bits, bounded depth). A header with magic byte 1 names its schema by GUID,
which is fetched as such.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from typing import Any

from streams.core.formats.avro import AvroBody
from streams.core.formats.jsontext import json_compacted, json_parse
from streams.core.formats.protobuf import protobuf_file
from streams.core.formats.registry import RegistryUnavailable, Undecodable, registry_client, registry_failure
from streams.core.formats.spec import (
    AVRO,
    AVRO_INLINE,
    JSON,
    JSONSCHEMA,
    PROTOBUF,
    FieldFormat,
    FormatError,
    avro_schema_parse,
)

Decoder = Callable[[bytes], Any]
SchemaKey = int | str  # a schema's id, or its GUID's text
# How long a schema id the registry does not know is taken as unknown (a later registration
# is seen after this), and how many such ids a decoder keeps.
UNKNOWN_SCHEMA_SECONDS = 30.0
UNKNOWN_SCHEMAS_KEPT = 1024


class _RegistryDecoder:
    """Runs one of confluent-kafka's deserializers, telling registry failures from bad bytes.

    The registry client's modules load with the first topic that needs them.
    """

    def __init__(self, url: str, topic: str, part: str) -> None:
        from confluent_kafka.schema_registry import dual_schema_id_deserializer
        from confluent_kafka.schema_registry.serde import SchemaId
        from confluent_kafka.serialization import MessageField, SerializationContext

        self._schema_id = SchemaId
        self._header_read = dual_schema_id_deserializer

        self.url = url
        self.client = registry_client(url)
        # Schema ids the registry said it does not know, until when: a poisoned topic's
        # records are skipped without one registry request each.
        self._unknown: dict[SchemaKey, tuple[float, str]] = {}
        self.context = SerializationContext(topic, MessageField.KEY if part == "key" else MessageField.VALUE)

    def _header(self, schema_type: str, data: bytes) -> tuple[Any, io.BytesIO]:
        """The record's schema id (and message indexes) and its payload, by confluent-kafka's header parser."""
        schema_id = self._schema_id(schema_type)
        try:
            return schema_id, self._header_read(data, self.context, schema_id)
        except Exception as exc:
            raise Undecodable(f"{type(exc).__name__}: {exc}") from exc

    def _schema_fetch(self, key: SchemaKey, schema_type: str, fmt: str | None = None) -> Any:
        """The registry's schema by id or GUID, if it is of ``schema_type``.

        :class:`Undecodable` for a schema of another kind (an Avro schema can be valid
        JSON Schema text, and the reverse), or if the registry does not know it;
        :class:`RegistryUnavailable` if it does not answer. A "not found" is remembered
        for :data:`UNKNOWN_SCHEMA_SECONDS`.
        """
        remembered = self._unknown.get(key)
        if remembered is not None and remembered[0] > time.monotonic():
            raise Undecodable(remembered[1])  # a new one: a raised exception keeps its traceback
        try:
            if isinstance(key, str):
                schema = self.client.get_schema_by_guid(key, fmt=fmt)
            else:
                schema = self.client.get_schema(key, fmt=fmt)
        except Exception as exc:
            failure = registry_failure(exc, self.url, f"schema {key}: ")
            if isinstance(failure, Undecodable):
                if len(self._unknown) >= UNKNOWN_SCHEMAS_KEPT:
                    self._unknown.clear()
                self._unknown[key] = (time.monotonic() + UNKNOWN_SCHEMA_SECONDS, str(failure))
            raise failure from exc
        if (schema.schema_type or "AVRO") != schema_type:
            raise Undecodable(f"schema {key} is {schema.schema_type}, not {schema_type}")
        return schema

    def _run(self, deserializer: Callable[[bytes, Any], Any], data: bytes) -> Any:
        try:
            return deserializer(data, self.context)
        except Exception as exc:
            raise registry_failure(exc, self.url) from exc


class AvroDecoder(_RegistryDecoder):
    """Avro by schema id: each writer schema fetched once and parsed by confluent-kafka's ``AvroDeserializer``.

    Records are read with fastavro's ``schemaless_reader``, as that deserializer
    reads them, without its per-record rule machinery (it walks the whole schema
    for field tags on every record: three times the cost of the read, measured by
    ``bench/formats.py``), which data-contract rules would need and Sluice has none of.
    """

    def __init__(self, url: str, topic: str, part: str) -> None:
        super().__init__(url, topic, part)
        from confluent_kafka.schema_registry import topic_subject_name_strategy
        from confluent_kafka.schema_registry.avro import AvroDeserializer

        self._deserializer = AvroDeserializer(self.client, conf={"subject.name.strategy": topic_subject_name_strategy})
        self._schemas: dict[SchemaKey, AvroBody] = {}

    def __call__(self, data: bytes) -> Any:
        schema_id, payload = self._header("AVRO", data)
        key = _schema_key(schema_id)
        body = self._schemas.get(key)
        if body is None:
            body = self._compile(key)
        return body.read(payload, f"avro (schema {key})")

    def _compile(self, key: SchemaKey) -> AvroBody:
        schema = self._schema_fetch(key, "AVRO")
        try:
            parsed = self._deserializer._get_parsed_schema(schema)
        except Exception as exc:
            raise registry_failure(exc, self.url, f"schema {key}: ") from exc
        return self._schemas.setdefault(key, AvroBody(parsed))


class JsonSchemaDecoder(_RegistryDecoder):
    def __init__(self, url: str, topic: str, part: str) -> None:
        super().__init__(url, topic, part)
        from confluent_kafka.schema_registry import topic_subject_name_strategy
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer

        # The writer validated the value when it serialized it; a topic or route schema checks it again if asked.
        # The value is its text, checked and compacted, numbers as written (no parse and render).
        self._deserializer = JSONDeserializer(
            None,
            schema_registry_client=self.client,
            conf={"subject.name.strategy": topic_subject_name_strategy, "validate": False},
            json_decode=json_compacted,
        )
        self._kinds: set[SchemaKey] = set()  # the ids checked to name JSON Schemas

    def __call__(self, data: bytes) -> Any:
        schema_id, _ = self._header("JSON", data)
        key = _schema_key(schema_id)
        if key not in self._kinds:
            self._schema_fetch(key, "JSON")
            self._kinds.add(key)
        return self._run(self._deserializer, data)


class ProtobufDecoder(_RegistryDecoder):
    """Protobuf by schema id: the writer's message class is compiled once per (schema id, message index).

    confluent-kafka's ``ProtobufDeserializer`` reads into a message class it is given;
    here the class comes from the writer's schema, fetched by the id in the record's
    header and built as that deserializer builds it, so any message of any registered
    schema decodes, with no generated code. Records are parsed by the class itself, as
    the deserializer parses them, without its per-record descriptor walk (three
    quarters of its cost, measured by ``bench/formats.py``).
    """

    def __init__(self, url: str, topic: str, part: str) -> None:
        super().__init__(url, topic, part)
        self._by_schema: dict[tuple[SchemaKey, tuple[int, ...]], Any] = {}
        self._lock = threading.Lock()
        from google.protobuf.json_format import MessageToDict

        self._to_dict = MessageToDict

    def __call__(self, data: bytes) -> Any:
        schema_id, payload = self._header("PROTOBUF", data)
        where = (_schema_key(schema_id), tuple(schema_id.message_indexes or (0,)))
        message_class = self._by_schema.get(where)
        if message_class is None:
            message_class = self._compile(*where)
        try:
            return self._to_dict(message_class.FromString(payload.read()))
        except Exception as exc:  # DecodeError, or a value the JSON mapping refuses
            raise Undecodable(f"protobuf (schema {where[0]}): {type(exc).__name__}: {exc}") from exc

    def _compile(self, schema_id: SchemaKey, indexes: tuple[int, ...]) -> Any:
        from google.protobuf.message_factory import GetMessageClass

        schema = self._schema_fetch(schema_id, "PROTOBUF", "serialized")
        try:
            described = protobuf_file(schema.schema_str, client=self.client, schema=schema)
        except Exception as exc:
            raise registry_failure(exc, self.url, f"schema {schema_id}: ") from exc
        try:
            if min(indexes) < 0:  # not from the end: a message the header does not name
                raise IndexError("negative index")
            message = list(described.message_types_by_name.values())[indexes[0]]
            for index in indexes[1:]:
                message = message.nested_types[index]
        except (IndexError, TypeError, ValueError, OverflowError) as exc:
            raise Undecodable(f"schema {schema_id} has no message at index {list(indexes)[:8]}: {exc}") from exc
        with self._lock:
            return self._by_schema.setdefault((schema_id, indexes), GetMessageClass(message))


class AvroInlineDecoder:
    """Plain Avro (no header), read with the writer schema given on the topic."""

    def __init__(self, schema_text: str, part: str) -> None:
        self._body = AvroBody(avro_schema_parse(schema_text, field=f"{part}_avro_schema"))

    def __call__(self, data: bytes) -> Any:
        return self._body.read(io.BytesIO(data), "avro-inline")


def _schema_key(schema_id: Any) -> SchemaKey:
    """The id a header names, or the text of its GUID (magic byte 1)."""
    return int(schema_id.id) if schema_id.id is not None else str(schema_id.guid)


def json_check(data: bytes) -> Any:
    """Checks a ``json`` value, which then goes out as written."""
    try:
        return json_parse(data)
    except ValueError as exc:
        raise Undecodable(f"not JSON: {exc}") from exc


def json_key(data: bytes) -> Any:
    """A ``json`` key: checked and compacted, numbers as written."""
    try:
        return json_compacted(data)
    except ValueError as exc:
        raise Undecodable(f"not JSON: {exc}") from exc


def field_decoder(field_format: FieldFormat, topic: str, part: str, registry_url: str) -> Decoder | None:
    """The decoder of one part (``value`` or ``key``) of a topic's records; None for text."""
    name = field_format.name
    if name == JSON:
        return json_check if part == "value" else json_key
    if name == AVRO_INLINE:
        return AvroInlineDecoder(field_format.inline_schema, part)
    if name in (AVRO, PROTOBUF, JSONSCHEMA):
        if not registry_url:
            raise FormatError("registry", f"{part} format {name} needs a schema registry (on the topic or its cluster)")
        decoders: dict[str, Callable[[str, str, str], Decoder]] = {
            AVRO: AvroDecoder,
            PROTOBUF: ProtobufDecoder,
            JSONSCHEMA: JsonSchemaDecoder,
        }
        return decoders[name](registry_url, topic, part)
    return None


__all__ = ["Decoder", "RegistryUnavailable", "Undecodable", "field_decoder"]
