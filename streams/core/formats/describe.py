"""Decoded payloads described as JSON Schema, for AsyncAPI: what a page receives, not what Kafka holds.

Avro schemas and Protobuf messages are translated as Sluice writes them (see
:mod:`streams.core.formats.jsontext` and the proto3 JSON mapping); a schema that
cannot be had or read is described by its format and subject instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from streams.core.formats.protobuf import protobuf_file
from streams.core.formats.spec import AVRO, AVRO_INLINE, JSONSCHEMA, PROTOBUF, TEXT, RecordFormats

_AVRO_PRIMITIVES: dict[str, dict[str, Any]] = {
    "null": {"type": "null"},
    "boolean": {"type": "boolean"},
    "int": {"type": "integer"},
    "long": {"type": "integer"},
    "float": {"type": "number"},
    "double": {"type": "number"},
    "string": {"type": "string"},
    "bytes": {"type": "string", "contentEncoding": "base64"},
}
_AVRO_LOGICAL: dict[str, dict[str, Any]] = {
    "decimal": {"type": "string", "description": "A decimal number, exact, as text."},
    "timestamp-millis": {"type": "string", "format": "date-time"},
    "timestamp-micros": {"type": "string", "format": "date-time"},
    "local-timestamp-millis": {"type": "string", "format": "date-time"},
    "local-timestamp-micros": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "time-millis": {"type": "string", "format": "time"},
    "time-micros": {"type": "string", "format": "time"},
    "uuid": {"type": "string", "format": "uuid"},
}


def avro_json_schema(schema: Any) -> dict[str, Any]:
    """The JSON Schema of an Avro schema's values as Sluice writes them (unions as plain values)."""
    return _AvroTranslation().translate(schema, "")


class _AvroTranslation:
    def __init__(self) -> None:
        self.named: dict[str, dict[str, Any]] = {}

    def translate(self, schema: Any, namespace: str) -> dict[str, Any]:
        if isinstance(schema, list):
            return {"anyOf": [self.translate(branch, namespace) for branch in schema]}
        if isinstance(schema, str):
            if schema in _AVRO_PRIMITIVES:
                return dict(_AVRO_PRIMITIVES[schema])
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            return dict(self.named.get(full) or self.named.get(schema) or {})
        if not isinstance(schema, dict):
            return {}
        logical = schema.get("logicalType")
        if logical in _AVRO_LOGICAL:
            return dict(_AVRO_LOGICAL[logical])
        kind = schema.get("type")
        if kind == "record" or kind == "error":
            return self._record(schema, namespace)
        if kind == "enum":
            out = {"type": "string", "enum": list(schema.get("symbols") or [])}
            self._name(schema, namespace, out)
            return out
        if kind == "fixed":
            out = {"type": "string", "contentEncoding": "base64"}
            self._name(schema, namespace, out)
            return out
        if kind == "array":
            return {"type": "array", "items": self.translate(schema.get("items"), namespace)}
        if kind == "map":
            return {"type": "object", "additionalProperties": self.translate(schema.get("values"), namespace)}
        return self.translate(kind, namespace)

    def _name(self, schema: dict[str, Any], namespace: str, out: dict[str, Any]) -> str:
        name = str(schema.get("name", ""))
        space = schema.get("namespace", namespace) or ""
        full = name if "." in name or not space else f"{space}.{name}"
        self.named[full] = out
        return full.rsplit(".", 1)[0] if "." in full else ""

    def _record(self, schema: dict[str, Any], namespace: str) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "title": str(schema.get("name", ""))}
        inner = self._name(schema, namespace, out)
        properties: dict[str, Any] = {}
        for field in schema.get("fields") or []:
            described = self.translate(field.get("type"), inner)
            if field.get("doc"):
                described["description"] = str(field["doc"])
            properties[str(field.get("name"))] = described
        out["properties"] = properties
        out["required"] = list(properties)
        if schema.get("doc"):
            out["description"] = str(schema["doc"])
        return out


# Protobuf field types (descriptor FieldDescriptor.TYPE_*) in the proto3 JSON mapping.
_PROTO_SCALARS: dict[int, dict[str, Any]] = {
    1: {"type": "number"},  # double
    2: {"type": "number"},  # float
    3: {"type": "string", "pattern": "^-?[0-9]+$"},  # int64
    4: {"type": "string", "pattern": "^[0-9]+$"},  # uint64
    5: {"type": "integer"},  # int32
    6: {"type": "string", "pattern": "^[0-9]+$"},  # fixed64
    7: {"type": "integer"},  # fixed32
    8: {"type": "boolean"},
    9: {"type": "string"},
    12: {"type": "string", "contentEncoding": "base64"},  # bytes
    13: {"type": "integer"},  # uint32
    15: {"type": "integer"},  # sfixed32
    16: {"type": "string", "pattern": "^-?[0-9]+$"},  # sfixed64
    17: {"type": "integer"},  # sint32
    18: {"type": "string", "pattern": "^-?[0-9]+$"},  # sint64
}
_TYPE_MESSAGE, _TYPE_ENUM, _TYPE_GROUP = 11, 14, 10
_PROTO_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": "^-?[0-9]+(\\.[0-9]+)?s$"},
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.FieldMask": {"type": "string"},
    "google.protobuf.Any": {"type": "object"},
    "google.protobuf.Empty": {"type": "object"},
}
_WRAPPERS = {
    "google.protobuf.DoubleValue": 1,
    "google.protobuf.FloatValue": 2,
    "google.protobuf.Int64Value": 3,
    "google.protobuf.UInt64Value": 4,
    "google.protobuf.Int32Value": 5,
    "google.protobuf.UInt32Value": 13,
    "google.protobuf.BoolValue": 8,
    "google.protobuf.StringValue": 9,
    "google.protobuf.BytesValue": 12,
}


def protobuf_json_schema(descriptor: Any) -> dict[str, Any]:
    """The JSON Schema of a Protobuf message (a ``Descriptor``) in the canonical proto3 JSON mapping.

    Messages are ``$defs`` named by their full name, so recursive messages stay finite.
    """
    defs: dict[str, Any] = {}
    root = _proto_message(descriptor, defs)
    return {**root, "$defs": defs} if defs else root


def _proto_message(descriptor: Any, defs: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for field in descriptor.fields:
        properties[field.json_name] = _proto_field(field, defs)
    return {"type": "object", "title": descriptor.name, "properties": properties}


def _proto_field(field: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _proto_single(value_field, defs)}
    single = _proto_single(field, defs)
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:
        repeated = field.label == 3
    return {"type": "array", "items": single} if repeated else single


def _proto_single(field: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if field.type == _TYPE_ENUM:
        return {"type": "string", "enum": [value.name for value in field.enum_type.values]}
    if field.type in (_TYPE_MESSAGE, _TYPE_GROUP):
        full = field.message_type.full_name
        if full in _PROTO_WELL_KNOWN:
            return dict(_PROTO_WELL_KNOWN[full])
        if full in _WRAPPERS:
            return {"anyOf": [dict(_PROTO_SCALARS[_WRAPPERS[full]]), {"type": "null"}]}
        if full not in defs:
            defs[full] = {}  # placeholder: a message that contains itself refers to it
            defs[full] = _proto_message(field.message_type, defs)
        return {"$ref": f"#/$defs/{full}"}
    return dict(_PROTO_SCALARS.get(field.type, {}))


def payload_description(
    formats: RecordFormats, topic: str, latest: Callable[[str, str | None], tuple[str, str] | None]
) -> dict[str, Any] | None:
    """The JSON Schema of what a page receives from ``topic``'s values; None for text.

    ``latest(subject, fmt)`` gives the registry's latest (schema type, schema text) of
    a subject (Protobuf asked with ``fmt="serialized"``), or None when it cannot.
    """
    kind = formats.value.name
    if kind == TEXT:
        return None
    subject = f"{topic}-value"
    fallback = {
        "description": f"{kind} records, sent as JSON; their schema is the registry's subject {subject}.",
        "x-sluice-format": kind,
    }
    try:
        if kind == AVRO_INLINE:
            described = avro_json_schema(json.loads(formats.value.inline_schema))
        elif kind in (AVRO, JSONSCHEMA, PROTOBUF):
            found = latest(subject, "serialized" if kind == PROTOBUF else None)
            if found is None:
                return fallback
            described = _registry_schema(kind, found[1])
        else:
            return {"description": "JSON, as the producer wrote it.", "x-sluice-format": kind}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return fallback
    return {**described, "x-sluice-format": kind}


def _registry_schema(kind: str, text: str) -> dict[str, Any]:
    if kind == AVRO:
        return avro_json_schema(json.loads(text))
    if kind == JSONSCHEMA:
        document = json.loads(text)
        return document if isinstance(document, dict) else {}
    described = protobuf_file(text)
    first = next(iter(described.message_types_by_name.values()))
    return protobuf_json_schema(first)
