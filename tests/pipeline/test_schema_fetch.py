"""A pipeline's schema read from a Confluent-compatible schema registry."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from pipeline.schema_fetch import RegistryError, registry_schema_fetch

SCHEMA = {"type": "object", "properties": {"match": {"type": "string"}}}
SUBJECTS: dict[str, dict[str, Any]] = {
    "/subjects/scores-value/versions/latest": {"schemaType": "JSON", "schema": json.dumps(SCHEMA)},
    "/subjects/scores-value/versions/2": {"schemaType": "JSON", "schema": json.dumps({**SCHEMA, "title": "v2"})},
    "/subjects/avro/versions/latest": {"schema": '{"type": "record"}'},
}


class Registry(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = SUBJECTS.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.end_headers()
        self.wfile.write(json.dumps(body or {"error_code": 40401}).encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(5)


def test_latest_and_pinned_versions(registry: str) -> None:
    assert registry_schema_fetch(registry, "scores-value") == SCHEMA
    assert registry_schema_fetch(registry, "scores-value", 2)["title"] == "v2"


@pytest.mark.parametrize(("subject", "message"), [("avro", "AVRO schema"), ("missing", "could not read")])
def test_what_is_not_a_json_schema_is_an_error(registry: str, subject: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        registry_schema_fetch(registry, subject)


@pytest.mark.django_db
def test_a_pipeline_resolves_its_registry_schema(registry: str) -> None:
    from pipeline.services import pipeline_upsert
    from streams.models import Schema

    Schema.objects.create(name="scores", registry_url=registry, subject="scores-value")
    pipeline = pipeline_upsert(name="p", source_topic="raw", schema="scores", sink_topic="out")
    assert pipeline.json_schema_resolved() == SCHEMA
