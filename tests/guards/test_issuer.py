"""The development token issuer: its key file, its tokens (checked by the demo guard) and POST /auth/token."""

from __future__ import annotations

import stat
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from guards.issuer import DEV_GUARD, issuer_key_ensure, issuer_key_load, token_issue
from guards.services import dev_guard_ensure
from guards.verification import TokenRejected, token_verify


@pytest.fixture
def key_file(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "var" / "issuer.pem"
    settings.SLUICE = {**settings.SLUICE, "DEV_ISSUER": True, "DEV_ISSUER_KEY_FILE": path}
    return path


def test_key_is_created_private_and_then_reused(key_file: Path) -> None:
    first = issuer_key_ensure(key_file)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert issuer_key_ensure(key_file) == first == issuer_key_load(key_file)
    assert first.public_jwk["alg"] == "ES256"
    assert "d" not in first.public_jwk


@pytest.mark.django_db
def test_issued_token_is_admitted_by_the_demo_guard(key_file: Path) -> None:
    key = issuer_key_ensure(key_file)
    policy = dev_guard_ensure(key=key, challenge=3).policy()
    issued = token_issue(key, identity="ada", roles=("scores:read", "x:y"), lifetime=30)
    principal = token_verify(policy, issued.access_token)
    assert principal.identity == "ada"
    assert principal.roles == frozenset({"scores:read", "x:y"})
    assert principal.expires == issued.expires_at
    assert 29 <= issued.expires_at - time.time() <= 30
    assert policy.challenge == 3


@pytest.mark.django_db
def test_a_token_from_another_key_is_refused(key_file: Path, tmp_path: Path) -> None:
    policy = dev_guard_ensure(key=issuer_key_ensure(key_file)).policy()
    stranger = issuer_key_ensure(tmp_path / "other.pem")
    with pytest.raises(TokenRejected) as refused:
        token_verify(policy, token_issue(stranger, identity="eve", roles=(), lifetime=30).access_token)
    assert refused.value.reason == "bad_signature"


def test_lifetime_is_bounded(key_file: Path) -> None:
    key = issuer_key_ensure(key_file)
    for lifetime in (0, 4, 3601):
        with pytest.raises(ValueError, match="lifetime"):
            token_issue(key, identity="ada", roles=(), lifetime=lifetime)


@pytest.fixture
def signed_in(db: None, django_user_model: Any) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user("ada", password="irrelevant-here"))
    return client


def post(client: Client, body: Any) -> Any:
    return client.post("/auth/token", body, content_type="application/json")


@pytest.mark.django_db
def test_endpoint_gives_a_token_the_guard_admits(signed_in: Client, key_file: Path) -> None:
    policy = dev_guard_ensure(key=issuer_key_ensure(key_file)).policy()
    response = post(signed_in, {"roles": ["scores:read"], "lifetime": 6})
    assert response.status_code == 200
    assert response["cache-control"].startswith("max-age=0")
    body = response.json()
    assert body["token_type"] == "Bearer"
    assert body["guard"] == DEV_GUARD
    assert body["identity"] == "ada"
    assert 5 <= body["expires_in"] <= 6
    principal = token_verify(policy, body["access_token"])
    assert (principal.identity, principal.roles) == ("ada", frozenset({"scores:read"}))


@pytest.mark.django_db
def test_endpoint_refuses_anonymous_users(key_file: Path) -> None:
    issuer_key_ensure(key_file)
    response = post(Client(), {})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert "access_token" not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"lifetime": 1}, "invalid_lifetime"),
        ({"lifetime": "60"}, "invalid_lifetime"),
        ({"lifetime": True}, "invalid_lifetime"),
        ({"roles": "scores:read"}, "invalid_roles"),
        ({"roles": ["two words"]}, "invalid_roles"),
        ({"roles": [""]}, "invalid_roles"),
        ([1, 2], "invalid_request"),
    ],
)
def test_endpoint_refuses_bad_requests(signed_in: Client, key_file: Path, body: Any, error: str) -> None:
    issuer_key_ensure(key_file)
    response = post(signed_in, body)
    assert response.status_code == 400
    assert response.json()["error"] == error


@pytest.mark.django_db
def test_endpoint_refuses_bad_json_and_get(signed_in: Client, key_file: Path) -> None:
    issuer_key_ensure(key_file)
    assert signed_in.post("/auth/token", b"{", content_type="application/json").json()["error"] == "invalid_json"
    assert signed_in.get("/auth/token").status_code == 405


@pytest.mark.django_db
def test_endpoint_needs_the_csrf_token_with_a_session(django_user_model: Any, key_file: Path) -> None:
    issuer_key_ensure(key_file)
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user("ada"))
    assert post(client, {}).status_code == 403


@pytest.mark.django_db
def test_endpoint_is_off_unless_enabled(signed_in: Client, key_file: Path, settings: Any) -> None:
    issuer_key_ensure(key_file)
    settings.SLUICE = {**settings.SLUICE, "DEV_ISSUER": False}
    assert post(signed_in, {}).status_code == 404


@pytest.mark.django_db
def test_endpoint_without_a_key_says_how_to_get_one(signed_in: Client, key_file: Path) -> None:
    response = post(signed_in, {})
    assert response.status_code == 503
    assert "runstreams --demo" in response.json()["detail"]


PAGE = "http://localhost:3000"


@pytest.fixture
def embedded(db: None, key_file: Path) -> Any:
    """The demo guard with a route that allows ``PAGE``, and a client that enforces CSRF like a browser."""
    from streams.models import Route

    guard = dev_guard_ensure(key=issuer_key_ensure(key_file))
    return Route.objects.create(path="/demo/guarded", topic="t", guard=guard, allow_origins=[PAGE])


def csrf_client(django_user_model: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user("ada"))
    return client


def test_a_page_its_routes_allow_gets_a_token_across_origins(embedded: Any, django_user_model: Any) -> None:
    client = csrf_client(django_user_model)
    preflight = client.options(
        "/auth/token",
        headers={
            "origin": PAGE,
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type",
        },
    )
    assert preflight.status_code == 204
    assert preflight["access-control-allow-origin"] == PAGE
    assert preflight["access-control-allow-credentials"] == "true"
    assert preflight["access-control-allow-methods"] == "POST"
    assert "content-type" in preflight["access-control-allow-headers"]
    # No CSRF token: the origin is what is checked for a page on another origin.
    answer = client.post("/auth/token", {"lifetime": 30}, content_type="application/json", headers={"origin": PAGE})
    assert answer.status_code == 200, answer.content
    assert answer["access-control-allow-origin"] == PAGE
    assert "origin" in answer["vary"].lower()
    assert answer.json()["identity"] == "ada"


def test_other_origins_forms_and_the_gateways_own_pages_without_csrf_are_refused(
    embedded: Any, django_user_model: Any
) -> None:
    client = csrf_client(django_user_model)
    evil = "https://evil.example.com"
    for method in (client.options, client.post):
        refused = method("/auth/token", "{}", content_type="application/json", headers={"origin": evil})
        assert refused.status_code == 403
        assert refused.json()["error"] == "origin_not_allowed"
        assert evil in refused.json()["detail"]
        assert "access-control-allow-origin" not in refused
    form = client.post("/auth/token", {"lifetime": "30"}, headers={"origin": PAGE})  # multipart: no preflight
    assert form.status_code == 415
    assert "access_token" not in form.content.decode()
    own = client.post("/auth/token", {}, content_type="application/json", headers={"origin": "http://testserver"})
    assert (own.status_code, own.json()["error"]) == (403, "csrf_failed")


def test_routes_without_origins_lend_the_issuer_the_project_default_and_star_does_not(
    embedded: Any, django_user_model: Any, settings: Any
) -> None:
    from streams.models import Route

    Route.objects.create(path="/demo/any", topic="t", guard=embedded.guard, allow_origins=["*"])
    Route.objects.create(path="/demo/inherits", topic="t", guard=embedded.guard)
    client = csrf_client(django_user_model)

    def asked(origin: str) -> int:
        return int(
            client.post("/auth/token", {}, content_type="application/json", headers={"origin": origin}).status_code
        )

    assert asked("https://site.example.com") == 403  # "*" on a route does not open the issuer to every site
    settings.SLUICE = {**settings.SLUICE, "CORS_ALLOW_ORIGINS": ("https://site.example.com",)}
    assert asked("https://site.example.com") == 200
    settings.SLUICE = {**settings.SLUICE, "DEV_ISSUER": False}
    assert asked(PAGE) == 404
    assert client.options("/auth/token", headers={"origin": PAGE}).status_code == 404
