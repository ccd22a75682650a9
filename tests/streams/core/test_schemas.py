"""Compiled schemas: one validator per schema version, one verdict per record."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from streams.core.records import Record
from streams.core.schemas import (
    RegistrySchemas,
    SchemaUnavailable,
    schema_reject_all,
    schema_validator_compile,
)

SCORE = {"type": "object", "required": ["match"], "properties": {"match": {"type": "string"}}}


def record(value: bytes | None, offset: int = 0) -> Record:
    return Record(0, offset, 0, None, value)


def test_valid_and_invalid_values() -> None:
    check = schema_validator_compile("score", SCORE)
    assert check.admits(record(b'{"match": "a"}'))
    assert not check.admits(record(b'{"match": 1}'))
    assert not check.admits(record(b"not json"))
    assert not check.admits(record(b"\xff\xfe"))
    assert check.admits(record(None))  # a tombstone has no value to check


def test_compiled_once_per_content() -> None:
    assert schema_validator_compile("score", SCORE) is schema_validator_compile("score", json.loads(json.dumps(SCORE)))
    other = schema_validator_compile("score", {**SCORE, "required": []})
    assert other.key != schema_validator_compile("score", SCORE).key


def test_verdict_computed_once_per_record(monkeypatch: pytest.MonkeyPatch) -> None:
    check = schema_validator_compile("once", SCORE)
    calls = 0
    inner = check._is_valid

    def counting(document: Any) -> bool:
        nonlocal calls
        calls += 1
        return bool(inner(document))

    monkeypatch.setattr(check, "_is_valid", counting)
    shared = record(b'{"match": "a"}')
    for _ in range(100):  # as a hub asks for every stream
        assert check.admits(shared)
    assert calls == 1
    assert shared.verdicts == {check.key: True}


def test_bad_schema_is_unavailable() -> None:
    with pytest.raises(SchemaUnavailable):
        schema_validator_compile("broken", {"type": "no-such-type"})


def test_reject_all_admits_no_value() -> None:
    check = schema_reject_all("gone", "registry down")
    assert not check.admits(record(b"{}"))


class FakeRegistry:
    def __init__(self) -> None:
        self.fetches: list[tuple[str, int]] = []
        self.latest = 2

    def get_latest_version(self, subject: str) -> Any:
        return SimpleNamespace(version=self.latest)

    def get_version(self, subject: str, version: int) -> Any:
        self.fetches.append((subject, version))
        schema = SCORE if version == 2 else {"type": "object"}
        return SimpleNamespace(schema=SimpleNamespace(schema_type="JSON", schema_str=json.dumps(schema)))


def test_registry_schema_fetched_once_per_version() -> None:
    fake = FakeRegistry()
    schemas = RegistrySchemas(client_factory=lambda url: fake)
    first = schemas.check("reg", "http://registry.test", "scores-value", None)
    again = schemas.check("reg", "http://registry.test", "scores-value", 2)
    assert first is again
    assert fake.fetches == [("scores-value", 2)]
    one = schemas.check("reg", "http://registry.test", "scores-value", 1)
    assert one is not first
    assert fake.fetches == [("scores-value", 2), ("scores-value", 1)]
    # Confluent's framing (magic byte, schema id) in front of the JSON is skipped.
    assert first.admits(record(b"\x00\x00\x00\x00\x07" + b'{"match": "a"}'))
    assert not first.admits(record(b"\x00\x00\x00\x00\x07" + b'{"match": 3}', offset=1))


def test_registry_errors_are_unavailable_and_not_retried_at_once() -> None:
    calls = 0

    class Down:
        def get_version(self, subject: str, version: int) -> Any:
            nonlocal calls
            calls += 1
            raise ConnectionError("refused")

    schemas = RegistrySchemas(client_factory=lambda url: Down())
    for _ in range(3):
        with pytest.raises(SchemaUnavailable):
            schemas.check("down", "http://registry.test", "s", 1)
    assert calls == 1  # a route table rebuilt every second does not wait on it again


def test_rejections_logged_with_position_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    check = schema_validator_compile("logged", {"type": "integer"})
    with caplog.at_level(logging.WARNING, logger="sluice.schemas"):
        for offset in range(5):
            check.rejected_log("scores", Record(2, offset, 0, None, b'"x"'), "topic")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "topic=scores partition=2 offset=0" in lines[0]


def test_real_registry_client_against_a_registry() -> None:
    from tests.support.schema_registry import registry_serve

    with registry_serve() as registry:
        registry.register("scores-value", {"type": "object"})
        registry.register("scores-value", SCORE)
        schemas = RegistrySchemas()
        latest = schemas.check("reg", registry.url, "scores-value", None)
        assert latest.key.endswith("|scores-value|2")
        assert not latest.admits(record(b"{}"))
        first = schemas.check("reg", registry.url, "scores-value", 1)
        assert first.admits(record(b"{}"))
        fetched = [r for r in registry.requests if "/versions/2" in r or "/versions/1" in r]
        for _ in range(3):
            schemas.check("reg", registry.url, "scores-value", 2)
        assert [r for r in registry.requests if "/versions/2" in r or "/versions/1" in r] == fetched
        with pytest.raises(SchemaUnavailable):
            schemas.check("reg", registry.url, "missing-value", 1)
