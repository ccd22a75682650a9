"""The landing page and the stream viewer, rendered by Django (their scripts run in tests/browser/)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from tests.support.tokens import guard_fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def routes() -> dict[str, Any]:
    from guards.services import guard_upsert
    from streams.services import route_upsert

    guard_upsert(name="pages-guard", **guard_fields())
    return {
        "kafka": route_upsert(path="/scores/{league}", topic="scores", order=1),
        "proxy": route_upsert(
            path="/upstream/*", kind="sse-proxy", upstream="http://127.0.0.1:9/events", topic="", order=2
        ),
        "guarded": route_upsert(path="/private", topic="private", guard="pages-guard", roles=["read"], order=3),
        "disabled": route_upsert(path="/off", topic="off", enabled=False, order=4),
    }


def test_landing_page_lists_kind_path_and_guard(routes: dict[str, Any]) -> None:
    html = Client().get("/").content.decode()
    assert '<li data-kind="sse-kafka" data-guarded="no">' in html
    assert '<li data-kind="sse-proxy" data-guarded="no">' in html
    assert '<li data-kind="sse-kafka" data-guarded="yes">' in html
    assert "/off" not in html
    assert f'href="/viewer/?route={routes["proxy"].pk}"' in html


def test_viewer_offers_every_enabled_route_with_its_parameters(routes: dict[str, Any]) -> None:
    response = Client().get(f"/viewer/?route={routes['guarded'].pk}")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<option value="{routes["guarded"].pk}" selected>/private (sse-kafka, guarded)</option>' in html
    data = json.loads(html.split('<script id="sluice-routes" type="application/json">')[1].split("</script>")[0])
    assert [(r["path"], r["kind"], r["guarded"], r["params"], r["wildcard"]) for r in data] == [
        ("/scores/{league}", "sse-kafka", False, ["league"], False),
        ("/upstream/*", "sse-proxy", False, [], True),
        ("/private", "sse-kafka", True, [], False),
    ]


def test_viewer_escapes_route_data_in_its_json(routes: dict[str, Any]) -> None:
    from streams.services import route_upsert

    route_upsert(path="/x", topic="x", description="</script><script>alert(1)</script>")
    html = Client().get("/viewer/").content.decode()
    assert "</script><script>alert(1)" not in html


def test_viewer_without_routes() -> None:
    assert "No routes yet" in Client().get("/viewer/").content.decode()
