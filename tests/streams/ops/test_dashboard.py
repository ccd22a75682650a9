"""The admin's live metrics page: linked from the admin index, staff only, fed by a JSON view of /metrics."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_admin_index_links_the_dashboard(admin_client_logged_in: Client) -> None:
    index = admin_client_logged_in.get("/admin/")
    assert index.status_code == 200
    assert b'href="/admin/metrics/"' in index.content
    page = admin_client_logged_in.get("/admin/metrics/")
    assert page.status_code == 200
    assert b'id="chart"' in page.content
    assert b"/admin/metrics.json" in page.content


def test_json_lists_the_samples(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.get("/admin/metrics.json")
    assert response.status_code == 200
    body = response.json()
    assert body["time"] > 0
    assert any(s["name"] == "sluice_kafka_consumers" and s["labels"] == {} for s in body["samples"])


def test_staff_only() -> None:
    anonymous = Client()
    assert anonymous.get("/admin/metrics/").status_code == 302  # to the admin login
    assert anonymous.get("/admin/metrics.json").status_code == 403
    member = Client()
    member.force_login(get_user_model().objects.create_user("bob", "b@example.com", "pw-for-tests"))
    assert member.get("/admin/metrics/").status_code == 302
    assert member.get("/admin/metrics.json").status_code == 403
