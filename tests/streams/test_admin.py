"""The admin refuses bad routes with a message on the form, and its list pages work."""

from __future__ import annotations

import pytest
from django.test import Client

from streams.models import Route, Topic

pytestmark = [pytest.mark.django_db, pytest.mark.services]


def route_form(**overrides: str) -> dict[str, str]:
    data = {
        "path": "/events/{topic}",
        "kind": "sse-kafka",
        "topic": "${params.topic}",
        "description": "",
        "enabled": "on",
        "order": "0",
        "initial": "live",
        "event_id": "etag",
        "binary": "skip",
        "retry_ms": "2000",
        "heartbeat_seconds": "15",
        "max_pending_bytes": "1048576",
        "filters-TOTAL_FORMS": "0",
        "filters-INITIAL_FORMS": "0",
        "filters-MIN_NUM_FORMS": "0",
        "filters-MAX_NUM_FORMS": "1000",
    }
    data.update(overrides)
    return data


def test_valid_route_is_saved(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post("/admin/streams/route/add/", route_form())
    assert response.status_code == 302
    assert Route.objects.get().topic == "${params.topic}"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("path", "events/{topic}", "must start with"),
        ("path", "/events/{topic", "unbalanced"),
        ("path", "/events/{1x}", "not a valid parameter name"),
        ("topic", "${params.topic", "unterminated"),
        ("topic", "${secret.x}", "is not one of"),
        ("topic", "${params.other}", "is not a parameter of the path"),
        ("where", "value.goals >", "found the end at position 14."),
        ("where", "value.team == ${params.team}", "${params.team} is not a parameter of the path"),
        ("where", "value.tenant == ${claims.tenant}", "need a guard"),
    ],
)
def test_bad_route_is_refused_on_the_form(admin_client_logged_in: Client, field: str, value: str, message: str) -> None:
    response = admin_client_logged_in.post("/admin/streams/route/add/", route_form(**{field: value}))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Route.objects.exists()


def test_a_route_with_a_where_filter_is_saved(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post(
        "/admin/streams/route/add/", route_form(where="value.goals > 2", client_filter="on")
    )
    assert response.status_code == 302
    route = Route.objects.get()
    assert route.where == "value.goals > 2"
    assert route.client_filter


def test_a_conflated_route_is_saved(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post(
        "/admin/streams/route/add/", route_form(conflate="key", conflate_max_rate="5")
    )
    assert response.status_code == 302
    route = Route.objects.get()
    assert (route.conflate, route.conflate_max_rate) == ("key", 5)


def test_bad_filter_is_refused_on_the_form(admin_client_logged_in: Client) -> None:
    data = route_form(
        **{
            "filters-TOTAL_FORMS": "1",
            "filters-0-key": "${params.nope}",
            "filters-0-headers": '{"tag": "blue"}',
        }
    )
    response = admin_client_logged_in.post("/admin/streams/route/add/", data)
    assert response.status_code == 200
    assert "is not a path parameter" in response.content.decode()
    data["filters-0-key"] = "${params.topic}"
    data["filters-0-headers"] = '["not", "an", "object"]'
    response = admin_client_logged_in.post("/admin/streams/route/add/", data)
    assert response.status_code == 200
    assert "Give an object of header names" in response.content.decode()
    assert not Route.objects.exists()


def test_list_pages_search_and_filter(admin_client_logged_in: Client) -> None:
    Topic.objects.create(name="scores")
    Route.objects.create(path="/scores", topic="scores", description="live scores")
    Route.objects.create(path="/news", topic="news", enabled=False)
    page = admin_client_logged_in.get("/admin/streams/route/", {"q": "scores"}).content.decode()
    assert "/scores" in page
    assert "/news" not in page
    page = admin_client_logged_in.get("/admin/streams/route/", {"enabled__exact": "0"}).content.decode()
    assert "/news" in page
    assert "/scores" not in page
    assert admin_client_logged_in.get("/admin/streams/topic/", {"q": "sco"}).status_code == 200


def test_topic_limits_are_validated(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post(
        "/admin/streams/topic/add/",
        {
            "name": "bad topic name!",
            "description": "",
            "cache_max_messages": "0",
            "cache_max_bytes": "10",
            "cache_max_age_seconds": "60",
        },
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "A Kafka topic name" in body
    assert not Topic.objects.exists()


def test_origins_and_roles_are_lists_one_per_line(admin_client_logged_in: Client) -> None:
    from guards.services import guard_upsert
    from tests.support.tokens import guard_fields

    guard = guard_upsert(name="lines", **guard_fields())
    form = route_form(
        allow_origins="https://app.example.com\r\nhttp://localhost:3000, http://127.0.0.1:8080\r\n",
        roles="read:items\r\n  read:scores \r\n",
        guard=str(guard.pk),
    )
    response = admin_client_logged_in.post("/admin/streams/route/add/", form)
    assert response.status_code == 302, response.content.decode()
    route = Route.objects.get()
    assert route.allow_origins == ["https://app.example.com", "http://localhost:3000", "http://127.0.0.1:8080"]
    assert route.roles == ["read:items", "read:scores"]
    page = admin_client_logged_in.get(f"/admin/streams/route/{route.pk}/change/").content.decode()
    assert "https://app.example.com\nhttp://localhost:3000\nhttp://127.0.0.1:8080</textarea>" in page
    assert "read:items\nread:scores</textarea>" in page
    assert "Enter a valid JSON" not in page


def test_a_bare_origin_and_a_pasted_json_list_both_work(admin_client_logged_in: Client) -> None:
    response = admin_client_logged_in.post("/admin/streams/route/add/", route_form(allow_origins="*"))
    assert response.status_code == 302
    assert Route.objects.get().allow_origins == ["*"]
    Route.objects.all().delete()
    response = admin_client_logged_in.post(
        "/admin/streams/route/add/", route_form(allow_origins='["https://a.example.com", "https://b.example.com"]')
    )
    assert response.status_code == 302
    assert Route.objects.get().allow_origins == ["https://a.example.com", "https://b.example.com"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("http://host/index.html", "&#x27;http://host/index.html&#x27; is not an origin"),
        ("https://app.example.com/", "ends with &#x27;/&#x27;"),
        ("app.example.com", "&#x27;app.example.com&#x27; is not an origin"),
    ],
)
def test_a_value_that_is_not_an_origin_is_refused_at_the_field(
    admin_client_logged_in: Client, value: str, message: str
) -> None:
    response = admin_client_logged_in.post(
        "/admin/streams/route/add/", route_form(allow_origins=f"https://fine.example.com\n{value}")
    )
    assert response.status_code == 200
    assert message in response.content.decode()
    assert list(response.context["adminform"].form.errors) == ["allow_origins"]
    assert not Route.objects.exists()
