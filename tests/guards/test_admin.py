"""The guard admin refuses unusable keys, algorithms and secrets with a message on the form, not a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from guards.models import Guard
from guards.services import guard_upsert
from streams.models import Route
from streams.services import route_upsert
from tests.streams.test_admin import route_form
from tests.support.tokens import SECRET, rsa_key

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def guard_form(**overrides: Any) -> dict[str, str]:
    data: dict[str, Any] = {
        "name": "main",
        "description": "",
        "issuer": "https://issuer.test",
        "audience": "sluice-tests",
        "algorithms": ["RS256"],
        "keys": [rsa_key().jwk()],
        "jwks_url": "",
        "secret": "",
        "roles_claim": "scope",
        "identity_claim": "sub",
        "attributes": {},
        "challenge": "0",
        "leeway": "0",
        "cookie_name": "",
        "header_name": "authorization",
        "header_template": "Bearer {credentials}",
        "query_param": "",
    }
    data.update(overrides)
    return {k: json.dumps(v) if isinstance(v, list | dict) else v for k, v in data.items()}


def test_valid_guard_is_saved(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post("/admin/guards/guard/add/", guard_form())
    assert response.status_code == 302, response.content.decode()
    assert Guard.objects.get().policy().keys[0].kid == "rsa-1"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"keys": [{"kty": "RSA", "kid": "k", "alg": "RS256", "n": "%%%", "e": "AQAB"}]}, "does not parse"),
        ({"algorithms": ["none"]}, "never allowed"),
        ({"algorithms": ["HS384"]}, "is not allowed"),
        ({"keys": [{**rsa_key().jwk(), "alg": "none"}]}, "never &#x27;none&#x27;"),
        ({"algorithms": ["RS256", "HS256"]}, "HS256 needs a secret"),
        ({"algorithms": ["HS256"], "keys": [], "secret": "too-short"}, "at least 32 bytes"),
        ({"header_template": "Bearer"}, "exactly once"),
        ({"keys": "not json"}, "Enter a valid JSON"),
    ],
)
def test_unusable_guard_is_refused_on_the_form(
    admin_client_logged_in: Client, overrides: dict[str, Any], message: str
) -> None:
    response = admin_client_logged_in.post("/admin/guards/guard/add/", guard_form(**overrides))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Guard.objects.exists()


def test_hs256_guard_with_secret_is_saved(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post(
        "/admin/guards/guard/add/", guard_form(algorithms=["HS256"], keys=[], secret=SECRET)
    )
    assert response.status_code == 302


def test_guard_list_and_change_pages(admin_client_logged_in: Client) -> None:
    admin_client_logged_in.post("/admin/guards/guard/add/", guard_form())
    guard = Guard.objects.get()
    assert admin_client_logged_in.get("/admin/guards/guard/").status_code == 200
    assert admin_client_logged_in.get(f"/admin/guards/guard/{guard.pk}/change/").status_code == 200


def test_guard_in_use_cannot_be_deleted(admin_client_logged_in: Client) -> None:
    guard_upsert(name="main", algorithms=["RS256"], keys=[rsa_key().jwk()])
    route_upsert(path="/secure/{t}", topic="${params.t}", guard="main", roles=["read"])
    response = admin_client_logged_in.post(f"/admin/guards/guard/{Guard.objects.get().pk}/delete/", {"post": "yes"})
    assert response.status_code == 200  # the "cannot delete, protected" page
    assert Guard.objects.exists()
    assert Route.objects.get().guard is not None


def test_route_form_takes_a_guard_and_roles(admin_client_logged_in: Client) -> None:
    guard = guard_upsert(name="main", algorithms=["RS256"], keys=[rsa_key().jwk()])
    response = admin_client_logged_in.post(
        "/admin/streams/route/add/", route_form(guard=str(guard.pk), roles='["read:items"]')
    )
    assert response.status_code == 302, response.content.decode()
    route = Route.objects.get()
    assert (route.guard, route.roles) == (guard, ["read:items"])


def test_route_form_refuses_a_role_name_with_a_space(admin_client_logged_in: Client) -> None:
    guard = guard_upsert(name="main", algorithms=["RS256"], keys=[rsa_key().jwk()])
    response = admin_client_logged_in.post(
        "/admin/streams/route/add/", route_form(guard=str(guard.pk), roles='["read items"]')
    )
    assert response.status_code == 200
    assert "a role name has no spaces" in response.content.decode()
    assert not Route.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"roles": '["read:items"]'}, "Roles need a guard."),
        ({"topic": "user-${identity}", "path": "/u"}, "need a guard"),
    ],
)
def test_route_form_refuses_token_fields_without_a_guard(
    admin_client_logged_in: Client, overrides: dict[str, str], message: str
) -> None:
    response = admin_client_logged_in.post("/admin/streams/route/add/", route_form(**overrides))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Route.objects.exists()
