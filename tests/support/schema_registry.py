"""A minimal Confluent-compatible schema registry on loopback, for tests: subjects and versions held in memory."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeRegistry:
    def __init__(self) -> None:
        self.subjects: dict[str, list[Any]] = {}
        self.requests: list[str] = []
        self.url = ""

    def register(self, subject: str, schema: Any) -> int:
        """Add a version of ``subject``; its number."""
        self.subjects.setdefault(subject, []).append(schema)
        return len(self.subjects[subject])

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        self.requests.append(path)
        found = re.fullmatch(r"/subjects/([^/]+)/versions/(latest|\d+)", path.split("?", 1)[0])
        if found is None or found.group(1) not in self.subjects:
            return 404, {"error_code": 40401, "message": "Subject not found"}
        versions = self.subjects[found.group(1)]
        number = len(versions) if found.group(2) == "latest" else int(found.group(2))
        if not 1 <= number <= len(versions):
            return 404, {"error_code": 40402, "message": "Version not found"}
        return 200, {
            "subject": found.group(1),
            "id": 100 + number,
            "version": number,
            "schemaType": "JSON",
            "schema": json.dumps(versions[number - 1]),
        }


@contextmanager
def registry_serve() -> Iterator[FakeRegistry]:
    registry = FakeRegistry()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = registry.answer(self.path)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/vnd.schemaregistry.v1+json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    registry.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
