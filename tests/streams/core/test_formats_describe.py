"""Decoded payloads as JSON Schema (AsyncAPI): Avro and Protobuf schemas translated as Sluice writes them."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from streams.core.formats.describe import avro_json_schema, payload_description, protobuf_json_schema
from streams.core.formats.spec import RecordFormats
from tests.support.protobuf_messages import Match

MATCH_AVRO = {
    "type": "record",
    "name": "Match",
    "namespace": "sluice.test",
    "fields": [
        {"name": "id", "type": "string"},
        {
            "name": "home",
            "type": {"type": "record", "name": "Team", "fields": [{"name": "name", "type": "string"}]},
        },
        {"name": "away", "type": "Team"},
        {"name": "scorers", "type": {"type": "array", "items": "string"}},
        {"name": "referee", "type": ["null", "string"]},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["LIVE", "DONE"]}},
        {"name": "odds", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}},
        {"name": "kickoff", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "extra", "type": {"type": "map", "values": "long"}},
    ],
}


def test_avro_schema_describes_what_pages_receive() -> None:
    described = avro_json_schema(MATCH_AVRO)
    jsonschema.Draft202012Validator.check_schema(described)
    page = {
        "id": "m1",
        "home": {"name": "Lions"},
        "away": {"name": "Bears"},
        "scorers": ["Ada"],
        "referee": None,
        "status": "LIVE",
        "odds": "12.50",
        "kickoff": "2026-05-17T19:45:00Z",
        "extra": {"attendance": 40000},
    }
    jsonschema.validate(page, described)
    assert described["properties"]["away"]["properties"] == {"name": {"type": "string"}}  # a named type reused
    assert described["properties"]["status"] == {"type": "string", "enum": ["LIVE", "DONE"]}
    wrong = {**page, "status": "PAUSED"}
    assert not jsonschema.Draft202012Validator(described).is_valid(wrong)


def test_protobuf_message_describes_the_proto3_json_mapping() -> None:
    described = protobuf_json_schema(Match.DESCRIPTOR)
    jsonschema.Draft202012Validator.check_schema(described)
    properties = described["properties"]
    assert properties["status"] == {"type": "string", "enum": ["SCHEDULED", "LIVE", "FINISHED"]}
    assert properties["attendance"]["type"] == "string"  # int64 is a string in proto3 JSON
    assert properties["scorers"] == {"type": "array", "items": {"type": "string"}}
    assert properties["home"] == {"$ref": "#/$defs/sluice.test.Match.Team"}
    page = {"id": "m1", "home": {"name": "Lions", "goals": 2}, "minute": 42, "status": "LIVE", "attendance": "4"}
    jsonschema.validate(page, described)


def test_payload_falls_back_to_format_and_subject() -> None:
    formats = RecordFormats.of("avro", registry="http://registry.test")
    described = payload_description(formats, "matches", lambda subject, fmt: None)
    assert described is not None
    assert described["x-sluice-format"] == "avro"
    assert "matches-value" in described["description"]


def test_payload_from_the_registry_latest_version() -> None:
    asked: list[tuple[str, Any]] = []

    def latest(subject: str, fmt: str | None) -> tuple[str, str]:
        asked.append((subject, fmt))
        return "AVRO", json.dumps(MATCH_AVRO)

    described = payload_description(RecordFormats.of("avro", registry="http://r"), "matches", latest)
    assert described is not None
    assert described["title"] == "Match"
    assert described["x-sluice-format"] == "avro"
    assert asked == [("matches-value", None)]
    assert payload_description(RecordFormats(), "matches", latest) is None
