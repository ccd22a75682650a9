"""A Confluent-compatible schema registry on loopback, for tests: subjects, versions and ids held in memory.

It answers the REST calls confluent-kafka's ``SchemaRegistryClient`` makes for its
serializers and deserializers: registering (``POST /subjects/S/versions``), looking
up (``POST /subjects/S``), schemas by id (``GET /schemas/ids/N``) and versions
(``GET /subjects/S/versions/V|latest``). :meth:`RegistryServer.stop` and
:meth:`RegistryServer.start` take it off the network and back on the same port,
with what it holds kept: an outage, not a new registry.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

_NOT_FOUND_SUBJECT = {"error_code": 40401, "message": "Subject not found"}
_NOT_FOUND_VERSION = {"error_code": 40402, "message": "Version not found"}
_NOT_FOUND_SCHEMA = {"error_code": 40403, "message": "Schema not found"}


@dataclass
class Registered:
    id: int
    schema: str
    schema_type: str
    references: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self, subject: str | None = None, version: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"id": self.id, "schema": self.schema, "schemaType": self.schema_type}
        if self.references:
            body["references"] = self.references
        if subject is not None:
            body.update(subject=subject, version=version)
        return body


class FakeRegistry:
    def __init__(self) -> None:
        self.subjects: dict[str, list[Registered]] = {}
        self.by_id: dict[int, Registered] = {}
        self.requests: list[str] = []
        self.url = ""
        self._next_id = 1000
        self._lock = threading.Lock()

    def register(self, subject: str, schema: Any, schema_type: str = "JSON") -> int:
        """Add a JSON Schema document as a version of ``subject``; its number (its id is 100 + number)."""
        versions = self.subjects.setdefault(subject, [])
        registered = Registered(100 + len(versions) + 1, json.dumps(schema), schema_type)
        versions.append(registered)
        self.by_id[registered.id] = registered
        return len(versions)

    def register_text(
        self, subject: str, schema: str, schema_type: str, references: list[dict[str, Any]] | None = None
    ) -> int:
        """Register ``schema`` (as a serializer would) under ``subject``; its id (the same schema keeps its id)."""
        with self._lock:
            for known in self.by_id.values():
                if known.schema == schema and known.schema_type == schema_type:
                    registered = known
                    break
            else:
                self._next_id += 1
                registered = Registered(self._next_id, schema, schema_type, list(references or []))
                self.by_id[registered.id] = registered
            versions = self.subjects.setdefault(subject, [])
            if registered not in versions:
                versions.append(registered)
            return registered.id

    def answer(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        self.requests.append(path)
        url = urlsplit(path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        query = parse_qs(url.query)
        if method == "POST" and len(parts) == 3 and parts[0] == "subjects" and parts[2] == "versions":
            assert body is not None
            schema_id = self.register_text(
                parts[1], body["schema"], body.get("schemaType", "AVRO"), body.get("references")
            )
            return 200, {"id": schema_id}
        if method == "POST" and len(parts) == 2 and parts[0] == "subjects":
            assert body is not None
            for number, registered in enumerate(self.subjects.get(parts[1], []), 1):
                if registered.schema == body["schema"]:
                    return 200, registered.as_dict(parts[1], number)
            return 404, _NOT_FOUND_SCHEMA
        if method == "GET" and len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
            found = self.by_id.get(int(parts[2]))
            if found is None:
                return 404, _NOT_FOUND_SCHEMA
            del query  # formats: the schemas are kept as the serializers wrote them (base64 descriptors too)
            return 200, found.as_dict()
        if method == "GET" and len(parts) == 4 and parts[0] == "subjects" and parts[2] == "versions":
            versions = self.subjects.get(parts[1])
            if versions is None:
                return 404, _NOT_FOUND_SUBJECT
            wanted = parts[3]
            number = len(versions) if wanted == "latest" else int(wanted) if re.fullmatch(r"\d+", wanted) else 0
            if not 1 <= number <= len(versions):
                return 404, _NOT_FOUND_VERSION
            return 200, versions[number - 1].as_dict(parts[1], number)
        return 404, {"error_code": 404, "message": f"no such call: {method} {url.path}"}


class RegistryServer:
    """Serves one :class:`FakeRegistry` on a fixed loopback port, stoppable and restartable."""

    def __init__(self, registry: FakeRegistry) -> None:
        self.registry = registry
        self.port = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        registry = self.registry

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                status, answer = registry.answer(method, self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/vnd.schemaregistry.v1+json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        registry.url = f"http://127.0.0.1:{self.port}"
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Off the network: connections to the port are refused until :meth:`start`."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


@contextmanager
def registry_running() -> Iterator[RegistryServer]:
    server = RegistryServer(FakeRegistry())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def registry_serve() -> Iterator[FakeRegistry]:
    with registry_running() as server:
        yield server.registry
