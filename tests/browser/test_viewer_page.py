"""The stream viewer in headless Chromium: live events with ids, types and arrival time; pause and resume."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Gateway, Kafka, UpstreamServer
from tests.guards.test_admission_wire import guard  # noqa: F401 (fixture)
from tests.support.polling import condition_wait
from tests.support.tokens import mint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "stream-viewer.png"
WAIT_MS = 20_000


def viewer_events(page: Any) -> list[dict[str, Any]]:
    return list(page.evaluate("window.viewerEvents || []"))


def wait_for_count(page: Any, count: int) -> None:
    page.wait_for_function("n => (window.viewerEvents || []).length >= n", arg=count, timeout=WAIT_MS)


def wait_for_state(page: Any, text: str) -> None:
    page.wait_for_function("t => document.getElementById('state-text').textContent === t", arg=text, timeout=WAIT_MS)


def test_viewer_shows_live_events_then_pauses_and_resumes_without_loss(
    browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any, tmp_path: Path
) -> None:
    page = browser_page
    topic = kafka.topic(prefix="viewer")
    made = route(
        path=f"/viewer-demo-{uuid.uuid4().hex[:4]}/{{league}}",
        topic=topic,
        filters=[{"headers": {"league": "${params.league}"}}],
        description="One league's matches, live",
    )
    page.goto(f"{gateway.url}/viewer/?route={made.pk}")
    page.fill("input[data-param=league]", "premier")
    page.click("#open")
    wait_for_state(page, "open")
    matches = [
        ("Arsenal", "Chelsea", 12, [1, 0]),
        ("Liverpool", "Everton", 31, [1, 1]),
        ("Arsenal", "Chelsea", 44, [2, 0]),
        ("Brighton", "Fulham", 52, [0, 1]),
        ("<b>Spurs</b>", "Villa", 60, [3, 2]),
    ]
    for n, (home, away, minute, score) in enumerate(matches):
        value = json.dumps({"home": home, "away": away, "minute": minute, "score": score})
        kafka.produce(topic, value, key=f"m{n}", headers={"league": "premier"}, flush=False)
    kafka.produce(topic, "not shown: another league", key="x", headers={"league": "liga"}, flush=False)
    kafka.produce(topic, None, key="m1", headers={"league": "premier"}, flush=False)  # full time: a tombstone
    kafka.flush()
    wait_for_count(page, 6)
    events = viewer_events(page)
    assert [e["type"] for e in events] == ["message"] * 5 + ["delete"]
    assert all(e["id"] and e["arrived"] for e in events)
    assert page.locator("#events tr").count() == 6
    assert page.locator("#events b").count() == 0  # payload markup is shown as text
    assert page.locator("#events tr", has_text="<b>Spurs</b>").count() == 1
    assert page.text_content("#last-id") == events[-1]["id"]

    page.click("#pause")
    wait_for_state(page, "paused")
    for n in range(3):
        kafka.produce(
            topic,
            json.dumps({"home": "Paused", "away": "Meanwhile", "minute": 70 + n, "score": [n, 0]}),
            key=f"p{n}",
            headers={"league": "premier"},
            flush=False,
        )
    kafka.flush()
    page.click("#resume")
    wait_for_state(page, "open")
    wait_for_count(page, 9)
    events = viewer_events(page)
    assert len(events) == 9
    assert len({e["id"] for e in events}) == 9  # nothing twice, nothing lost
    assert [json.loads(e["data"])["minute"] for e in events[6:]] == [70, 71, 72]
    assert page.text_content("#resumed-from") == events[5]["id"]  # the resume named the last id before the pause
    assert page.errors == []

    target = SCREENSHOT if os.environ.get("SLUICE_UPDATE_SCREENSHOTS") else tmp_path / SCREENSHOT.name
    target.parent.mkdir(parents=True, exist_ok=True)
    page.locator("body").screenshot(path=str(target))
    assert target.stat().st_size > 10_000


def test_viewer_on_a_proxy_route_with_named_types_and_a_token(
    browser_page: Any, gateway: Gateway, route: Any, upstream_sse: UpstreamServer
) -> None:
    page = browser_page
    made = route(
        path=f"/viewer-proxy-{uuid.uuid4().hex[:6]}", kind="sse-proxy", upstream=f"{upstream_sse.url}/events", topic=""
    )
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/viewer-proxy-" in r.url else None)
    # A stand-in for the token panel: the viewer appends its token only to guarded routes.
    page.add_init_script("window.sluiceToken = {current: () => 'tok'};")
    page.goto(f"{gateway.url}/viewer/?route={made.pk}")
    page.click("#open")
    wait_for_state(page, "open")
    condition_wait(lambda: upstream_sse.log() == [None], within=20, what="the upstream opened")
    upstream_sse.publish(3)
    wait_for_count(page, 3)
    assert [(e["id"], e["type"]) for e in viewer_events(page)] == [("1", "message"), ("2", "message"), ("3", "tick")]
    assert requests
    assert all("access_token" not in url for url in requests)


def test_viewer_sends_the_token_panel_token_to_a_guarded_route(
    browser_page: Any,
    gateway: Gateway,
    kafka: Kafka,
    route: Any,
    guard: Callable[..., str],  # noqa: F811 (the fixture imported above)
) -> None:
    page = browser_page
    topic = kafka.topic(prefix="viewer-guarded")
    made = route(
        path=f"/viewer-guarded-{uuid.uuid4().hex[:6]}",
        topic=topic,
        guard=guard(query_param="access_token"),
        roles=["read:items"],
    )
    token = mint()
    page.add_init_script(f"window.sluiceToken = {{current: () => {json.dumps(token)}}};")
    sent: list[dict[str, str]] = []
    page.on("request", lambda r: sent.append(r.all_headers()) if "/viewer-guarded-" in r.url else None)
    page.goto(f"{gateway.url}/viewer/?route={made.pk}")
    page.click("#open")
    wait_for_state(page, "open")
    kafka.produce(topic, "for token holders", key="k")
    wait_for_count(page, 1)
    assert viewer_events(page)[0]["data"] == "for token holders"
    # In a header, never in the URL (which the page shows and servers log).
    assert sent[0]["authorization"] == f"Bearer {token}"
    assert "access_token" not in (page.text_content("#url") or "")


def test_viewer_opens_several_routes_as_one_stream(
    browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any, upstream_sse: UpstreamServer
) -> None:
    page = browser_page
    topic, tag = kafka.topic(prefix="viewer-set"), uuid.uuid4().hex[:6]
    scores = route(path=f"/viewer-set-{tag}/scores", topic=topic, initial="earliest")
    relayed = route(path=f"/viewer-set-{tag}/relay", kind="sse-proxy", upstream=f"{upstream_sse.url}/events", topic="")
    kafka.produce(topic, "a score")
    gets: list[str] = []
    page.on("request", lambda r: gets.append(r.url) if r.method == "GET" and "/streams?" in r.url else None)
    page.goto(f"{gateway.url}/viewer/?route={scores.pk}")
    page.click("#add")
    page.select_option("#route", str(relayed.pk))
    page.click("#add")
    page.click("#open-set")
    wait_for_state(page, "open")
    wait_for_count(page, 1)
    condition_wait(lambda: upstream_sse.log() == [None], within=20, what="the upstream opened")
    upstream_sse.publish(1)
    wait_for_count(page, 2)
    assert [(e["member"], e["type"], e["data"]) for e in viewer_events(page)] == [
        ("0", "message", "a score"),
        ("1", "message", "event 1"),
    ]
    assert len(gets) == 1  # one request for both
    assert (page.text_content("#url") or "").startswith("GET /streams?s=0%3A")
    assert page.errors == []
