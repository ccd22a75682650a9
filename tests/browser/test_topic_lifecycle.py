"""A topic from the admin to the browser: added, a route on it, created in Kafka, its records in two EventSources.

Everything goes through a real gateway: the admin's real login page, its topic and route
forms, the topic list's "Create in Kafka" action. One plain ``EventSource`` opens on the
route before the topic exists in Kafka (the gateway holds it: 200, ``retry``, heartbeats),
one after; the records produced then reach both.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.conftest import Gateway

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 60_000
PASSWORD = "a-password-for-tests"
PAGE = """
window.streams = {};
window.follow = (name, url) => {
  const got = [];
  const source = new EventSource(url);
  source.onmessage = (event) => got.push(event.data);
  window.streams[name] = {source, got};
};
"""


def log_in(page: Any, gateway: Gateway, django_user_model: Any) -> None:
    # Hashed for the gateway's own settings (the test settings hash with MD5, which it does not accept).
    password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    django_user_model.objects.create(username="ops", password=password, is_staff=True, is_superuser=True)
    page.goto(f"{gateway.url}/admin/login/?next=/admin/")
    page.fill("#id_username", "ops")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{gateway.url}/admin/")


def saved(page: Any) -> str:
    """The admin's message after a save or an action (fails on a form that did not save)."""
    page.wait_for_selector("ul.messagelist li", timeout=WAIT_MS)
    return str(page.inner_text("ul.messagelist"))


def stream_state(page: Any, name: str) -> dict[str, Any]:
    return dict(page.evaluate("n => ({state: streams[n].source.readyState, got: streams[n].got})", name))


def test_a_topic_added_in_the_admin_and_created_in_kafka_reaches_the_browser(
    browser_page: Any, gateway_factory: Callable[..., Gateway], kafka: Any, django_user_model: Any
) -> None:
    admin = browser_page
    gateway = gateway_factory()
    topic = f"shop.orders-{uuid.uuid4().hex[:8]}"
    path = f"/shop/{uuid.uuid4().hex[:8]}/orders"
    log_in(admin, gateway, django_user_model)

    admin.goto(f"{gateway.url}/admin/streams/topic/add/")
    admin.fill("#id_name", topic)
    admin.click("input[name=_save]")
    assert topic in saved(admin)

    admin.goto(f"{gateway.url}/admin/streams/route/add/")
    admin.fill("#id_path", path)
    admin.fill("#id_topic", topic)
    admin.fill("#id_heartbeat_seconds", "2")
    admin.click("input[name=_save]")
    assert "missing from cluster" in saved(admin)  # saved, with a warning: not in Kafka yet

    viewer = admin.context.new_page()
    errors: list[str] = []
    viewer.on("pageerror", lambda exc: errors.append(str(exc)))
    viewer.goto(f"{gateway.url}/healthz")  # any page of the gateway's origin
    viewer.add_script_tag(content=PAGE)
    viewer.evaluate("url => follow('before', url)", path)
    viewer.wait_for_function("streams.before.source.readyState === 1", timeout=WAIT_MS)  # held: 200

    admin.goto(f"{gateway.url}/admin/streams/topic/?q={topic}")
    admin.check(f"tr:has-text('{topic}') input.action-select")
    admin.select_option("select[name=action]", "kafka_create")
    admin.click("button[name=index]")
    assert topic in saved(admin)
    assert stream_state(viewer, "before")["state"] == 1, "the EventSource gave up"

    viewer.evaluate("url => follow('after', url)", path)
    viewer.wait_for_function("streams.after.source.readyState === 1", timeout=WAIT_MS)
    expected = [f"order-{n}" for n in range(5)]
    for value in expected:
        kafka.produce(topic, value)
    for name in ("before", "after"):
        viewer.wait_for_function(
            "([n, want]) => streams[n].got.length >= want", arg=[name, len(expected)], timeout=WAIT_MS
        )
        state = stream_state(viewer, name)
        assert state["got"] == expected, name
        assert state["state"] == 1, name
    assert errors == []
