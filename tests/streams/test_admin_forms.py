"""The admin's forms read well: labels in words, choices that say what they mean, no ``null``, wide numbers."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from common.admin_forms import BlankWhenNullJSONField
from streams.admin import TopicAdmin
from streams.models import Route, Topic

pytestmark = pytest.mark.django_db


def textarea(html: str, name: str) -> str:
    match = re.search(rf'<textarea[^>]*name="{name}"[^>]*>(.*?)</textarea>', html, re.DOTALL)
    assert match, f"no textarea {name}"
    return match.group(1).strip()


def input_tag(html: str, name: str) -> str:
    match = re.search(rf'<input[^>]*name="{name}"[^>]*>', html)
    assert match, f"no input {name}"
    return match.group(0)


def route_saved() -> Route:
    return Route.objects.create(path="/forms/{league}", topic="forms.scores")


def test_the_add_topic_form_prefills_no_null(admin_client_logged_in: Client) -> None:
    page = admin_client_logged_in.get("/admin/streams/topic/add/").content.decode()
    assert textarea(page, "value_avro_schema") == ""
    assert textarea(page, "key_avro_schema") == ""
    assert ">null<" not in page.replace("\n", "")


def test_a_topic_saved_with_empty_schema_boxes_has_none(admin_client_logged_in: Client) -> None:
    form = {
        "name": "forms.plain",
        "value_format": "text",
        "key_format": "text",
        "configs": "{}",
        "value_avro_schema": "",
        "key_avro_schema": "",
        "cache_max_messages": "10000",
        "cache_max_bytes": "16777216",
        "cache_max_age_seconds": "3600",
    }
    response = admin_client_logged_in.post("/admin/streams/topic/add/", form)
    assert response.status_code == 302, response.content.decode()[-2000:]
    topic = Topic.objects.get(name="forms.plain")
    assert topic.value_avro_schema is None
    assert topic.key_avro_schema is None
    page = admin_client_logged_in.get(f"/admin/streams/topic/{topic.pk}/change/").content.decode()
    assert textarea(page, "value_avro_schema") == ""


def test_blank_when_null_json_field_keeps_values() -> None:
    field = BlankWhenNullJSONField(required=False)
    assert field.prepare_value(None) == ""
    assert field.prepare_value({"type": "string"}) == '{"type": "string"}'
    assert field.clean("") is None


def test_byte_counts_get_the_wide_input(admin_client_logged_in: Client) -> None:
    route = route_saved()
    page = admin_client_logged_in.get(f"/admin/streams/route/{route.pk}/change/").content.decode()
    pending = input_tag(page, "max_pending_bytes")
    assert "vBigIntegerField" in pending
    assert 'value="1048576"' in pending
    topic = admin_client_logged_in.get("/admin/streams/topic/add/").content.decode()
    assert "vBigIntegerField" in input_tag(topic, "cache_max_bytes")
    assert "input.vBigIntegerField { width: 12em; }" in page  # the site's stylesheet


@pytest.mark.parametrize(
    ("url", "labels"),
    [
        (
            "/admin/streams/route/{pk}/change/",
            [
                "Start from",
                "Accept ?since=",
                "Event id form",
                "Values that are not text",
                "Reconnect delay (ms)",
                "Heartbeat every (seconds)",
                "Most bytes queued per client",
            ],
        ),
        (
            "/admin/streams/topic/add/",
            [
                "Topic configs",
                "Value schema (Avro)",
                "Key schema (Avro)",
                "Cache: most records",
                "Cache: most bytes",
                "Cache: oldest record (seconds)",
            ],
        ),
        ("/admin/streams/schema/add/", ["JSON Schema (inline)", "Registry URL"]),
        ("/admin/pipeline/pipeline/add/", ["JSON Schema (inline)", "SQL", "Trigger every (seconds)"]),
    ],
)
def test_labels_are_words(admin_client_logged_in: Client, url: str, labels: list[str]) -> None:
    page = admin_client_logged_in.get(url.format(pk=route_saved().pk)).content.decode()
    shown = re.findall(r"<label[^>]*>(.*?)</label>", page, re.DOTALL)
    for label in labels:
        assert f"{label}:" in shown or label in shown, (label, shown)
    for raw in ("Max pending bytes", "Retry ms", "Cache max bytes", "Value avro schema", "Json schema"):
        assert raw not in page


def test_the_event_id_choices_say_what_they_hold(admin_client_logged_in: Client) -> None:
    route = route_saved()
    page = admin_client_logged_in.get(f"/admin/streams/route/{route.pk}/change/").content.decode()
    select = re.search(r'<select name="event_id".*?</select>', page, re.S)
    assert select is not None
    options = dict(re.findall(r'<option value="(etag|key)"[^>]*>(.*?)</option>', select.group(0)))
    assert options["etag"].startswith("Position: progress")
    assert "etag header" in options["etag"]
    assert options["key"].startswith("Key and position")
    assert "Clients may start at a time: ?since=2024-05-01T12:00:00Z" in page


def test_the_topic_list_shows_the_cache_in_one_column() -> None:
    topic = Topic(name="forms.cache", cache_max_messages=10_000, cache_max_bytes=16 * 1024 * 1024)
    admin = TopicAdmin(Topic, None)  # type: ignore[arg-type]
    assert admin.cache(topic) == "10,000, 16.0\xa0MB, 3,600 s"
    assert admin.formats(topic) == "text / text"
