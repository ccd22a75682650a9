"""The REST API for guards: validated like the admin, the secret never read back, in-use guards kept."""

from __future__ import annotations

import pytest
from django.test import Client

from guards.models import Guard
from tests.support.tokens import guard_fields

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def test_guard_create_list_update_delete(admin_client_logged_in: Client) -> None:
    api = admin_client_logged_in
    created = api.post("/api/guards/", {"name": "authn", **guard_fields()}, content_type="application/json")
    assert created.status_code == 201, created.content
    assert "secret" not in created.json()
    listed = api.get("/api/guards/").json()["results"]
    assert [g["name"] for g in listed] == ["authn"]
    assert "secret" not in listed[0]
    patched = api.patch("/api/guards/authn/", {"challenge": 10}, content_type="application/json")
    assert patched.status_code == 200
    assert Guard.objects.get(name="authn").challenge == 10
    assert Guard.objects.get(name="authn").secret  # kept when not sent
    api.post("/api/routes/", {"path": "/g", "topic": "t", "guard": "authn"}, content_type="application/json")
    assert api.delete("/api/guards/authn/").status_code == 409
    api.delete(f"/api/routes/{api.get('/api/routes/').json()['results'][0]['id']}/")
    assert api.delete("/api/guards/authn/").status_code == 204


def test_guard_policy_errors_are_field_errors(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post(
        "/api/guards/",
        {"name": "bad", **guard_fields(algorithms=["none"])},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "algorithms" in response.json()
