"""The JSON Schema -> Spark translation's pure parts: which keywords need the fallback, the Spark types, rule names."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.types import ArrayType, BooleanType, DoubleType, LongType, StringType, StructField, StructType

from pipeline.validation import SchemaError, json_schema_rule, schema_members, schema_record_type, schema_residual
from tests.support.pipeline_records import SCORE_SCHEMA


def test_the_score_schema_needs_no_fallback() -> None:
    assert schema_residual(SCORE_SCHEMA) == []


def test_keywords_without_a_builtin_are_listed_with_where_they_are() -> None:
    schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"email": {"type": "string", "format": "email"}, "tags": {"items": {"uniqueItems": True}}},
    }
    assert schema_residual(schema) == ["additionalProperties", "email.format", "tags.*.uniqueItems"]


def test_record_type_follows_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "n": {"type": ["number", "null"]},
            "b": {"type": "boolean"},
            "a": {"type": "array", "items": {"type": "integer"}},
            "o": {"type": "object", "properties": {"x": {"type": "string"}}},
            "free": {},
        },
    }
    assert schema_record_type(schema) == StructType(
        [
            StructField("s", StringType()),
            StructField("i", LongType()),
            StructField("n", DoubleType()),
            StructField("b", BooleanType()),
            StructField("a", ArrayType(LongType())),
            StructField("o", StructType([StructField("x", StringType())])),
            StructField("free", StringType()),
        ]
    )


def test_record_type_needs_an_object_with_properties() -> None:
    with pytest.raises(SchemaError):
        schema_record_type({"type": "array"})


def test_members_are_listed_with_pointer_and_variant_path() -> None:
    schema = {"properties": {"a": {"properties": {"it's": {}}}, "b/c": {}}}
    assert schema_members(schema) == [("/a", "$['a']"), ("/a/it's", "$['a']['it\\'s']"), ("/b~1c", "$['b/c']")]


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ('{"match": "match-1", "league": "liga", "minute": 3, "seq": 1}', None),
        ('{"match": "match-1", "league": "liga", "minute": 3, "seq": 1, "score": [1, -1]}', "minimum:/score/1"),
        ('{"match": "match-1"', "json:/"),
        (None, "json:/"),
    ],
)
def test_fallback_rule_names(value: str | None, rule: str | None) -> None:
    assert json_schema_rule(json.dumps(SCORE_SCHEMA, sort_keys=True), value) == rule
