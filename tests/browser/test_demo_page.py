"""The landing page in a real browser: its EventSource survives a gateway restart without loss or duplicates."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import page_events
from tests.conftest import Gateway, Kafka

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "demo-page.png"
WAIT_MS = 20_000
PARTITIONS = 3


def wait_for_state(page: Any, text: str) -> None:
    page.wait_for_function("t => document.getElementById('state-text').textContent === t", arg=text, timeout=WAIT_MS)


def wait_for_data(page: Any, values: list[str]) -> None:
    """Until every value in ``values`` has been received by the page (bounded)."""
    page.wait_for_function(
        "want => { const got = new Set((window.sluiceEvents || []).map(e => e.data));"
        " return want.every(v => got.has(v)); }",
        arg=values,
        timeout=WAIT_MS,
    )


def produce_numbered(kafka: Kafka, topic: str, numbers: range, produced: dict[int, list[str]]) -> list[str]:
    values = []
    for n in numbers:
        partition = n % PARTITIONS
        value = f"msg-{n:03d}"
        kafka.produce(topic, value, key=f"k{n}", partition=partition, flush=False)
        produced[partition].append(value)
        values.append(value)
    kafka.flush()
    return values


def test_page_resumes_across_gateway_restart(browser_page: Any, own_gateway: Gateway, kafka: Kafka, route) -> None:
    page = browser_page
    topic = kafka.topic(partitions=PARTITIONS, prefix="browser")
    path = f"/browser/{topic}"
    # Lowest order: the page lists it first and opens it by itself. Live start, short retry.
    route(path=path, topic=topic, order=-1000, initial="live", retry_ms=300, description="browser resume test")

    stream_requests: list[dict[str, str]] = []
    page.on("request", lambda r: stream_requests.append(r.all_headers()) if r.url.endswith(path) else None)

    page.goto(own_gateway.url + "/")
    assert page.input_value("#path") == path
    wait_for_state(page, "open")  # the start position is fixed before the headers are sent

    produced: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    before = produce_numbered(kafka, topic, range(0, 12), produced)
    wait_for_data(page, before)
    last_id_before = page.text_content("#last-id")
    assert last_id_before == page_events(page)[-1]["id"]

    own_gateway.stop()
    page.wait_for_function(
        "() => document.getElementById('state-text').textContent !== 'open'", timeout=WAIT_MS
    )  # the page saw the stream end
    during = produce_numbered(kafka, topic, range(12, 24), produced)
    own_gateway.start(port=own_gateway.port)

    wait_for_data(page, during)
    wait_for_state(page, "open")
    after = produce_numbered(kafka, topic, range(24, 36), produced)
    wait_for_data(page, after)

    events = page_events(page)
    received = [e["data"] for e in events]
    # Every message exactly once, each partition in production order (Kafka orders within a partition only).
    assert sorted(received) == sorted(before + during + after)
    for partition, values in produced.items():
        assert [v for v in received if int(v[4:]) % PARTITIONS == partition] == values
    assert all(e["type"] == "message" for e in events)
    assert len({e["id"] for e in events}) == len(events)
    assert page.text_content("#state-text") == "open"
    assert page.get_attribute("#state", "data-state") == "open"
    assert page.text_content("#count") == str(len(before + during + after))
    assert page.text_content("#last-id") == events[-1]["id"]

    # The browser resumed by itself, with the id of the last event it had before the restart.
    assert len(stream_requests) >= 2
    assert "last-event-id" not in stream_requests[0]
    assert stream_requests[-1].get("last-event-id") == last_id_before
    assert page.errors == []


def match_value(key: str, league: str, home: str, away: str, minute: int, score: tuple[int, int]) -> str:
    value = {"match": key, "league": league, "home": home, "away": away, "minute": minute, "score": list(score)}
    return json.dumps(value)


def test_demo_page_screenshot(browser_page: Any, gateway: Gateway, kafka: Kafka, route, tmp_path: Path) -> None:
    """The landing page with live scores (SLUICE_UPDATE_SCREENSHOTS=1 saves it as docs/screenshots/demo-page.png)."""
    page = browser_page
    topic = kafka.topic(partitions=PARTITIONS, prefix="scores")
    route(
        path="/demo/scores",
        topic=topic,
        order=-1000,
        initial="snapshot",
        description="Every match: current scores first, then live updates",
    )
    route(
        path="/demo/leagues/{league}",
        topic=topic,
        order=-999,
        filters=[{"headers": {"league": "${params.league}"}}],
        description="One league's matches (premier or liga), live",
    )
    matches = [
        ("match-0", "premier", "Arsenal", "Chelsea"),
        ("match-1", "liga", "Betis", "Girona"),
        ("match-2", "premier", "Liverpool", "Everton"),
        ("match-3", "liga", "Sevilla", "Valencia"),
    ]
    for i, (key, league, home, away) in enumerate(matches):
        kafka.produce(
            topic,
            match_value(key, league, home, away, 20 + 7 * i, (i % 2, 1)),
            key=key,
            partition=i % 3,
            headers={"league": league},
        )

    page.goto(gateway.url + "/")
    assert page.input_value("#path") == "/demo/scores"
    page.wait_for_function("n => (window.sluiceEvents || []).length >= n", arg=len(matches), timeout=WAIT_MS)
    wait_for_state(page, "open")

    live = [
        ("match-0", "premier", "Arsenal", "Chelsea", 51, (1, 1)),
        ("match-2", "premier", "Liverpool", "Everton", 58, (2, 1)),
        ("match-1", "liga", "Betis", "Girona", 63, (1, 2)),
    ]
    received = len(matches)
    # One at a time (Kafka orders per partition only), so the table reads in a known order.
    for key, league, home, away, minute, score in live:
        kafka.produce(
            topic,
            match_value(key, league, home, away, minute, score),
            key=key,
            partition=int(key[-1]) % 3,
            headers={"league": league},
        )
        received += 1
        page.wait_for_function("n => (window.sluiceEvents || []).length >= n", arg=received, timeout=WAIT_MS)
    kafka.produce(topic, None, key="match-3", partition=0, headers={"league": "liga"})  # full time: a tombstone
    total = received + 1
    page.wait_for_function("n => (window.sluiceEvents || []).length >= n", arg=total, timeout=WAIT_MS)

    events = page_events(page)
    assert len(events) == total
    assert events[-1]["type"] == "delete"
    assert page.locator("#events tr").count() == total
    assert page.locator("#events tr.delete").count() == 1
    assert page.locator("#events tr", has_text="Liverpool 2 \u2013 1 Everton \u00b7 58'").count() == 1
    assert "ended: match-3" in page.locator("#events tr").first.text_content()  # newest first
    assert page.text_content("#state-text") == "open"
    assert page.errors == []

    target = SCREENSHOT if os.environ.get("SLUICE_UPDATE_SCREENSHOTS") else tmp_path / SCREENSHOT.name
    target.parent.mkdir(parents=True, exist_ok=True)
    page.locator("body").screenshot(path=str(target))  # the content, not the empty viewport below
    assert target.stat().st_size > 10_000


def test_page_shows_payloads_as_text(browser_page: Any, gateway: Gateway, kafka: Kafka, route) -> None:
    """Markup in a payload (also inside the score view's JSON fields) is shown, never run."""
    page = browser_page
    topic = kafka.topic(prefix="markup")
    route(path=f"/markup/{topic}", topic=topic, order=-1000)
    page.goto(gateway.url + "/")
    wait_for_state(page, "open")
    attack = "<img src=x onerror=window.pwned=1>"
    kafka.produce(topic, attack)
    kafka.produce(topic, match_value("m", "liga", attack, "Getafe", 10, (0, 0)))
    page.wait_for_function("() => (window.sluiceEvents || []).length >= 2", timeout=WAIT_MS)
    assert page.locator("#events img").count() == 0
    assert page.evaluate("window.pwned === undefined")
    assert page.locator("#events tr", has_text=f"{attack} 0 \u2013 0 Getafe").count() == 1
    assert page.errors == []
