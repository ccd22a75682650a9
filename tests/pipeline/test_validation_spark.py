"""JSON Schema checks run as Spark expressions agree with the jsonschema library, rule by rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline.validation import RULE_COLUMN, json_schema_rule, records_validate
from tests.support.pipeline_records import SCORE_SCHEMA

pytestmark = pytest.mark.slow

GOOD = {"match": "match-1", "league": "liga", "minute": 5, "seq": 1, "score": [1, 0], "home": "Betis"}
CASES: list[tuple[Any, str | None]] = [
    (GOOD, None),
    ({**GOOD, "minute": 5.0}, None),  # 5.0 is an integer in JSON Schema
    ({**GOOD, "home": "é😀"}, None),  # lengths in code points
    ({k: v for k, v in GOOD.items() if k != "match"}, "required:/match"),
    ({**GOOD, "match": "m"}, "pattern:/match"),
    ({**GOOD, "match": None}, "type:/match"),
    ({**GOOD, "match": 7}, "type:/match"),
    ({**GOOD, "minute": "5"}, "type:/minute"),
    ({**GOOD, "minute": 5.5}, "type:/minute"),
    ({**GOOD, "minute": True}, "type:/minute"),
    ({**GOOD, "minute": 500}, "maximum:/minute"),
    ({**GOOD, "minute": -1}, "minimum:/minute"),
    ({**GOOD, "league": "x"}, "enum:/league"),
    ({**GOOD, "league": 1}, "enum:/league"),
    ({**GOOD, "score": [1, -1]}, "minimum:/score/*"),
    ({**GOOD, "score": [1, "a"]}, "type:/score/*"),
    ({**GOOD, "score": [1]}, "minItems:/score"),
    ({**GOOD, "score": [1, 2, 3]}, "maxItems:/score"),
    ({**GOOD, "score": "1-0"}, "type:/score"),
    ({**GOOD, "home": ""}, "minLength:/home"),
    ({**GOOD, "home": "x" * 41}, "maxLength:/home"),
    ([1, 2], "type:/"),
    ("just text", "type:/"),
    ('{"match": ', "json:/"),
]


def frame(spark: Any, values: list[Any]) -> Any:
    texts = [v if isinstance(v, str) and v.startswith("{") else json.dumps(v) for v in values]
    return spark.createDataFrame([(i, t.encode()) for i, t in enumerate(texts)], "i int, value binary"), texts


def test_builtin_checks_name_the_rule(spark: Any) -> None:
    df, texts = frame(spark, [value for value, _ in CASES])
    rules = {row.i: row[RULE_COLUMN] for row in records_validate(df, SCORE_SCHEMA).collect()}
    assert [rules[i] for i in range(len(CASES))] == [rule for _, rule in CASES]
    # Valid or not, the library agrees; its rule names differ only in where required/items point.
    schema_text = json.dumps(SCORE_SCHEMA, sort_keys=True)
    for text, (_, rule) in zip(texts, CASES, strict=True):
        assert (json_schema_rule(schema_text, text) is None) == (rule is None), text


def test_keywords_without_builtin_fall_back_to_jsonschema(spark: Any) -> None:
    schema = {
        "type": "object",
        "required": ["id"],
        "additionalProperties": False,
        "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "uniqueItems": True}},
    }
    values = [{"id": 1, "tags": ["a", "b"]}, {"id": 1, "tags": ["a", "a"]}, {"id": 1, "x": 2}, {"id": "1"}]
    df, _ = frame(spark, values)
    rules = [row[RULE_COLUMN] for row in records_validate(df, schema).orderBy("i").collect()]
    assert rules == [None, "uniqueItems:/tags", "additionalProperties:/", "type:/id"]
