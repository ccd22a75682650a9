"""The REST API for schemas, topics and routes: staff only, validated like the admin, OpenAPI described."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from streams.models import Route, RouteFilter, Schema, Topic

pytestmark = [pytest.mark.django_db, pytest.mark.services]

SCORE = {"type": "object", "required": ["match"]}


@pytest.fixture
def api(admin_client_logged_in: Client) -> Client:
    return admin_client_logged_in


def post(client: Client, url: str, body: dict[str, Any], **extra: Any) -> Any:
    return client.post(url, body, content_type="application/json", **extra)


def test_schema_list_create_update_delete(api: Client) -> None:
    assert api.get("/api/schemas/").json()["results"] == []
    created = post(api, "/api/schemas/", {"name": "score", "json_schema": SCORE})
    assert created.status_code == 201, created.content
    assert created.json()["json_schema"] == SCORE
    assert [s["name"] for s in api.get("/api/schemas/").json()["results"]] == ["score"]
    patched = api.patch("/api/schemas/score/", {"description": "scores"}, content_type="application/json")
    assert patched.status_code == 200
    assert Schema.objects.get(name="score").description == "scores"
    assert api.delete("/api/schemas/score/").status_code == 204
    assert not Schema.objects.exists()


def test_schema_needs_inline_or_registry(api: Client) -> None:
    response = post(api, "/api/schemas/", {"name": "nothing"})
    assert response.status_code == 400
    assert "non_field_errors" in response.json()
    response = post(api, "/api/schemas/", {"name": "half", "registry_url": "http://registry.test:8081"})
    assert response.status_code == 400
    assert "subject" in response.json()


def test_topic_with_schema_and_a_schema_in_use_is_not_deleted(api: Client) -> None:
    post(api, "/api/schemas/", {"name": "score", "json_schema": SCORE})
    created = post(api, "/api/topics/", {"name": "scores.v1", "schema": "score", "cache_max_messages": 50})
    assert created.status_code == 201, created.content
    assert Topic.objects.get(name="scores.v1").schema == Schema.objects.get(name="score")
    assert api.get("/api/topics/scores.v1/").json()["cache_max_messages"] == 50
    conflict = api.delete("/api/schemas/score/")
    assert conflict.status_code == 409
    assert "scores.v1" in conflict.json()["detail"]
    bad = post(api, "/api/topics/", {"name": "bad name!", "cache_max_bytes": 10})
    assert bad.status_code == 400
    assert set(bad.json()) == {"name", "cache_max_bytes"}
    unknown = post(api, "/api/topics/", {"name": "t2", "schema": "missing"})
    assert unknown.status_code == 400
    assert "schema" in unknown.json()


def test_topic_formats(api: Client) -> None:
    registry = "https://${env.SR_USER}:${env.SR_PASSWORD}@registry.example.com"
    created = post(api, "/api/topics/", {"name": "orders", "value_format": "avro", "registry": registry})
    assert created.status_code == 201, created.content
    assert created.json()["registry"] == registry  # references, never a secret
    assert Topic.objects.get(name="orders").formats().uses_registry
    secret = post(api, "/api/topics/", {"name": "t1", "value_format": "avro", "registry": "https://u:pw@sr.test"})
    assert secret.status_code == 400
    assert "secret" in secret.json()["registry"][0]
    unknown = post(api, "/api/topics/", {"name": "t2", "value_format": "xml"})
    assert unknown.status_code == 400
    assert set(unknown.json()) == {"value_format"}
    no_registry = post(api, "/api/topics/", {"name": "t3", "key_format": "protobuf"})
    assert no_registry.status_code == 400
    assert "registry" in no_registry.json()
    inline = post(api, "/api/topics/", {"name": "t4", "value_format": "avro-inline"})
    assert inline.status_code == 400
    assert "value_avro_schema" in inline.json()


def test_route_with_nested_filters(api: Client) -> None:
    body = {
        "path": "/scores/{match}",
        "topic": "scores",
        "filters": [{"key": "${params.match}", "headers": {"tag": "blue"}}, {"headers": {"tag": "red"}}],
        "initial": "earliest",
    }
    created = post(api, "/api/routes/", body)
    assert created.status_code == 201, created.content
    route_id = created.json()["id"]
    assert created.json()["filters"] == [
        {"key": "${params.match}", "headers": {"tag": "blue"}},
        {"key": "", "headers": {"tag": "red"}},
    ]
    assert RouteFilter.objects.filter(route_id=route_id).count() == 2
    # PATCH without filters keeps them; with filters replaces them.
    api.patch(f"/api/routes/{route_id}/", {"heartbeat_seconds": 5}, content_type="application/json")
    assert RouteFilter.objects.filter(route_id=route_id).count() == 2
    api.patch(f"/api/routes/{route_id}/", {"filters": []}, content_type="application/json")
    assert RouteFilter.objects.filter(route_id=route_id).count() == 0
    # A new path renames the route (same id).
    put = api.put(
        f"/api/routes/{route_id}/", {**body, "path": "/live/{match}", "filters": []}, content_type="application/json"
    )
    assert put.status_code == 200, put.content
    assert Route.objects.get(pk=route_id).path == "/live/{match}"
    assert api.delete(f"/api/routes/{route_id}/").status_code == 204


def test_route_validation_errors_name_fields(api: Client) -> None:
    response = post(api, "/api/routes/", {"path": "/a/{x}", "topic": "${params.y}"})
    assert response.status_code == 400
    assert "params.y" in response.json()["topic"][0]
    response = post(api, "/api/routes/", {"path": "/b/{x}", "topic": "t", "filters": [{"key": "${params.nope}"}]})
    assert response.status_code == 400
    assert "key" in str(response.json())
    assert not Route.objects.filter(path="/b/{x}").exists()  # nothing half-written
    post(api, "/api/routes/", {"path": "/c", "topic": "t"})
    duplicate = post(api, "/api/routes/", {"path": "/c", "topic": "t"})
    assert duplicate.status_code == 400
    assert "exists" in duplicate.json()["path"][0]


def test_route_where_is_validated_with_its_position(api: Client) -> None:
    response = post(api, "/api/routes/", {"path": "/w/{x}", "topic": "t", "where": "value.a == 1 and"})
    assert response.status_code == 400
    assert response.json()["where"] == [
        "expected a field, a number, a string, true or false, found the end at position 17."
    ]
    created = post(
        api, "/api/routes/", {"path": "/w/{x}", "topic": "t", "where": "value.a == ${params.x}", "client_filter": True}
    )
    assert created.status_code == 201, created.content
    assert (created.json()["where"], created.json()["client_filter"]) == ("value.a == ${params.x}", True)


def test_route_conflation_is_a_field_of_the_api(api: Client) -> None:
    created = post(api, "/api/routes/", {"path": "/ticks", "topic": "t", "conflate": "key", "conflate_max_rate": 5})
    assert created.status_code == 201, created.content
    assert (created.json()["conflate"], created.json()["conflate_max_rate"]) == ("key", 5)
    proxy = post(api, "/api/routes/", {"path": "/up", "kind": "sse-proxy", "upstream": "http://a/x", "conflate": "key"})
    assert proxy.status_code == 400
    assert proxy.json()["conflate"] == ["Only sse-kafka routes conflate records."]


def test_anonymous_gets_401_and_non_staff_403() -> None:
    anonymous = Client()
    response = anonymous.get("/api/topics/")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    user = get_user_model().objects.create_user("bob", "bob@example.com", "pw-for-tests")
    member = Client()
    member.force_login(user)
    assert member.get("/api/topics/").status_code == 403
    assert post(member, "/api/topics/", {"name": "t"}).status_code == 403
    assert member.get("/api/schema/").status_code == 403


def test_session_writes_need_csrf() -> None:
    user = get_user_model().objects.create_superuser("root2", "root2@example.com", "pw-for-tests")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.get("/api/topics/").status_code == 200
    refused = post(strict, "/api/topics/", {"name": "t"})
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    strict.get("/admin/")  # sets the csrftoken cookie
    token = strict.cookies["csrftoken"].value
    assert post(strict, "/api/topics/", {"name": "t"}, HTTP_X_CSRFTOKEN=token).status_code == 201


def test_bearer_token_for_staff_only() -> None:
    model = get_user_model()
    model.objects.create_user("staff", "s@example.com", "pw-for-tests", is_staff=True)
    model.objects.create_user("plain", "p@example.com", "pw-for-tests")
    client = Client()
    refused = post(client, "/api/token/", {"username": "plain", "password": "pw-for-tests"})
    assert refused.status_code == 401
    issued = post(client, "/api/token/", {"username": "staff", "password": "pw-for-tests"})
    assert issued.status_code == 200
    access = issued.json()["access"]
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {access}"}
    assert client.get("/api/topics/", **bearer).status_code == 200
    assert post(client, "/api/topics/", {"name": "by-token"}, **bearer).status_code == 201  # no CSRF for tokens
    assert client.get("/api/topics/", HTTP_AUTHORIZATION="Bearer not.a.token").status_code == 401


def test_openapi_document(api: Client) -> None:
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    for url in ("/api/topics/", "/api/routes/{id}/", "/api/schemas/{name}/", "/api/guards/"):
        assert url in document["paths"], sorted(document["paths"])
    route = document["components"]["schemas"]["Route"]
    assert route["properties"]["filters"]["type"] == "array"


def test_route_origins_are_validated_with_the_field_named(api: Client) -> None:
    for origins, said in [
        (["https://app.example.com", "https://app.example.com/index.html"], "is not an origin"),
        (["https://app.example.com/"], "ends with '/'"),
        ("https://app.example.com", "expected a list"),
    ]:
        response = post(api, "/api/routes/", {"path": "/o", "topic": "t", "allow_origins": origins})
        assert response.status_code == 400, origins
        assert said in response.json()["allow_origins"][0].lower()
    assert not Route.objects.exists()
    created = post(api, "/api/routes/", {"path": "/o", "topic": "t", "allow_origins": ["http://localhost:3000"]})
    assert created.status_code == 201, created.content
    assert created.json()["allow_origins"] == ["http://localhost:3000"]
