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
