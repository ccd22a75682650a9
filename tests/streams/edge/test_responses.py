"""A path no route or page answers gets 404: JSON for stream and API clients, HTML for people."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_not_found_is_json_for_event_stream_clients(client: Client) -> None:
    response = client.get("/no/such/stream", HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "status": 404, "detail": "no route or page for /no/such/stream"}


def test_not_found_is_a_page_for_browsers(client: Client) -> None:
    response = client.get("/no/such/page", HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert response.status_code == 404
    assert response["content-type"].startswith("text/html")
