"""The stream router: Sluice's own endpoints never wait for the route table; no table read yet is not a 404."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import RequestFactory

from streams import views
from streams.core.errors import DatabaseNotAvailable
from streams.edge.app import StreamRouter
from streams.edge.runtime import WorkerRuntime


async def test_own_endpoints_never_read_the_route_table(monkeypatch: pytest.MonkeyPatch) -> None:
    async def unreadable() -> None:
        raise AssertionError("the route table was read")

    monkeypatch.setattr("streams.edge.app.route_table", unreadable)
    passed: list[str] = []

    async def django(scope: dict[str, Any], receive: Any, send: Any) -> None:
        passed.append(scope["path"])

    runtime = WorkerRuntime("127.0.0.1:9")
    router = StreamRouter(django, runtime)
    paths = ["/healthz", "/readyz", "/metrics", "/admin/", "/api/routes/"]
    try:
        for path in paths:
            await router({"type": "http", "path": path, "method": "GET", "headers": []}, None, None)  # type: ignore[arg-type]
    finally:
        runtime.listeners_stop()
    assert passed == paths


async def test_with_no_route_table_read_a_stream_path_goes_to_django(monkeypatch: pytest.MonkeyPatch) -> None:
    async def away() -> None:
        raise DatabaseNotAvailable("away")

    monkeypatch.setattr("streams.edge.app.route_table", away)
    passed: list[str] = []

    async def django(scope: dict[str, Any], receive: Any, send: Any) -> None:
        passed.append(scope["path"])

    runtime = WorkerRuntime("127.0.0.1:9")
    try:
        await StreamRouter(django, runtime)({"type": "http", "path": "/orders/7", "headers": []}, None, None)  # type: ignore[arg-type]
    finally:
        runtime.listeners_stop()
    assert passed == ["/orders/7"]


def test_django_answers_503_not_404_while_no_route_table_was_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("streams.views.route_table_unknown", lambda: True)
    answer = views.not_found(RequestFactory().get("/orders/7"))
    assert answer.status_code == 503
    assert answer["retry-after"] == "5"
    assert json.loads(answer.content)["error"] == "database_unavailable"
    monkeypatch.setattr("streams.views.route_table_unknown", lambda: False)
    assert views.not_found(RequestFactory().get("/orders/7")).status_code == 404
