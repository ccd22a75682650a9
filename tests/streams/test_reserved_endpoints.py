"""Sluice's own endpoints always win: routes that would take one are refused three ways, general ones never see them.

Also the seed's Zilla "SSE Kafka Proxy" example end to end: it imports as a route that serves ``/events``
only, and after it the health check, metrics and AsyncAPI document answer as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from streams.models import Route
from streams.services import cluster_upsert, route_upsert, topic_upsert
from tests.streams.test_admin import route_form
from tests.support.config_commands import FIXTURES, applyconfig, applyconfig_refused
from tests.support.sse_client import EventParser

KAFKA_EXAMPLE = FIXTURES / "zilla.sse.kafka.yaml"
WAIT = 30.0

pytestmark = pytest.mark.services


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "endpoint"), [("/metrics", "/metrics"), ("/admin/{x}", "/admin/")])
def test_admin_form_refuses_a_route_on_an_endpoint(admin_client_logged_in: Client, path: str, endpoint: str) -> None:
    topic = "${params.x}" if "{x}" in path else "scores"
    response = admin_client_logged_in.post("/admin/streams/route/add/", route_form(path=path, topic=topic))
    assert response.status_code == 200  # the form again, with the error
    assert f"The route {path} would take Sluice&#x27;s own endpoint {endpoint}" in response.content.decode()
    assert not Route.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "endpoint"), [("/metrics", "/metrics"), ("/admin/{x}", "/admin/")])
def test_rest_api_refuses_a_route_on_an_endpoint(admin_client_logged_in: Client, path: str, endpoint: str) -> None:
    topic = "${params.x}" if "{x}" in path else "scores"
    response = admin_client_logged_in.post(
        "/api/routes/", {"path": path, "topic": topic}, content_type="application/json"
    )
    assert response.status_code == 400
    [message] = response.json()["path"]
    assert message.startswith(f"The route {path} would take Sluice's own endpoint {endpoint}")
    assert not Route.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "endpoint"), [("/metrics", "/metrics"), ("/admin/{x}", "/admin/")])
def test_applyconfig_refuses_a_route_on_an_endpoint(tmp_path: Path, path: str, endpoint: str) -> None:
    topic = "${params.x}" if "{x}" in path else "scores"
    config = tmp_path / "routes.yaml"
    config.write_text(f"routes:\n  - path: {path}\n    topic: '{topic}'\n", encoding="utf-8")
    error = applyconfig_refused(config)
    assert error.startswith(
        f"{config}:2:5: routes[0].path: The route {path} would take Sluice's own endpoint {endpoint}"
    )
    assert not Route.objects.exists()


@pytest.mark.django_db
def test_a_general_route_is_accepted_and_listed_with_the_endpoints_it_never_serves(
    admin_client_logged_in: Client,
) -> None:
    topic_upsert(name="scores")
    route_upsert(path="/{topic}", topic="${params.topic}")
    listing = admin_client_logged_in.get("/admin/streams/route/").content.decode()
    assert "never serves /healthz, /readyz, /metrics" in listing
    page = Client().get("/").content.decode()
    assert "Sluice's own endpoints answer first: never serves /healthz" in page


@pytest.mark.django_db
def test_pages_carry_an_icon_and_a_lock_without_an_emoji_font(admin_client_logged_in: Client) -> None:
    from guards.services import guard_upsert

    icon = Client().get("/favicon.ico")
    assert icon.status_code == 200
    assert icon["content-type"] == "image/svg+xml"
    assert icon.content.startswith(b"<svg")
    guard_upsert(name="g", secret="s" * 32, algorithms=["HS256"])
    topic_upsert(name="scores")
    route_upsert(path="/secure", topic="scores", guard="g", roles=["read"])
    page = Client().get("/").content.decode()
    assert '<svg class="lock"' in page
    assert "\U0001f512" not in page  # the lock emoji
    assert '<link rel="icon" href="/favicon.ico"' in page


async def test_zilla_example_serves_events_and_leaves_sluices_endpoints_alone(
    gateway: Any, kafka: Any, stream_db: None
) -> None:
    report = await sync_to_async(applyconfig)(KAFKA_EXAMPLE)
    assert "created route /events" in report
    # The example's kafka client points at kafka:29092; here the cluster is the test broker.
    await sync_to_async(cluster_upsert)(name="south_kafka_client", bootstrap_servers=kafka.bootstrap)
    assert "skipped bindings.north_http_server.routes[0].when[0].headers.:authority" in report
    other = kafka.topic(prefix="other")
    kafka.topic_named("events")
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as client:
        health = await client.get("/healthz")
        assert health.status_code == 200
        assert health.json()["status"] == "ok"
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200
        assert "sluice_" in metrics.text
        asyncapi = await client.get("/asyncapi.json")
        assert asyncapi.status_code == 200
        assert "/events" in {channel["address"] for channel in asyncapi.json()["channels"].values()}
        kafka.produce(other, '{"not":"served"}')
        refused = await client.get(f"/{other}", headers={"accept": "text/event-stream"})
        assert refused.status_code == 404
        async with client.stream("GET", "/events") as response:
            assert response.status_code == 200
            parser, events = EventParser(), []
            chunks = response.aiter_raw()
            while not events:  # the start checkpoint
                events += parser.feed(await anext(chunks))
            kafka.produce("events", '{"match":"a"}', key="a")
            while not any(e.has_data for e in events):
                events += parser.feed(await anext(chunks))
    assert [e.data for e in events if e.has_data] == ['{"match":"a"}']
