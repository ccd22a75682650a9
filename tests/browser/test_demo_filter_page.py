"""The demo's filtered scores page in a real browser: the gateway sends only the matches the page's filter picks.

The page (``/viewer/scores/``) opens the demo's client-filter route through sluice.js's ``where``
option; records that do not match are produced beside matching ones and must never arrive.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from demo.scores import DEMO_LIVE_ROUTE
from tests.browser.conftest import page_events
from tests.conftest import Gateway, Kafka

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "demo-filtered-scores.png"
WAIT_MS = 20_000
PARTITIONS = 3


class Scores:
    """Score updates to the test's topic, as the demo's producer writes them (JSON, keyed by match)."""

    def __init__(self, kafka: Kafka, topic: str) -> None:
        self.kafka = kafka
        self.topic = topic

    def update(self, match: str, minute: int, score: tuple[int, int], league: str = "premier") -> str:
        home, away = {"premier": ("Arsenal", "Chelsea"), "liga": ("Betis", "Girona")}[league]
        value = json.dumps(
            {
                "match": match,
                "league": league,
                "home": home,
                "away": away,
                "score": list(score),
                "goals": sum(score),
                "minute": minute,
            }
        )
        self.kafka.produce(self.topic, value, key=match, partition=int(match.rsplit("-", 1)[1]) % PARTITIONS)
        return value

    def full_time(self, match: str) -> None:
        self.kafka.produce(self.topic, None, key=match, partition=int(match.rsplit("-", 1)[1]) % PARTITIONS)


def values_received(page: Any) -> list[dict[str, Any]]:
    return [json.loads(e["data"]) for e in page_events(page) if e["type"] == "message"]


def wait_for_match(page: Any, match: str, minute: int) -> None:
    """Until the page has received ``match`` at ``minute`` (bounded)."""
    page.wait_for_function(
        "([m, t]) => (window.sluiceEvents || []).some(e => e.type === 'message'"
        " && JSON.parse(e.data).match === m && JSON.parse(e.data).minute === t)",
        arg=[match, minute],
        timeout=WAIT_MS,
    )


def filter_apply(page: Any, goals: int, minute: int) -> None:
    page.fill("#goals", str(goals))
    page.fill("#minute", str(minute))
    page.click("#apply")
    page.wait_for_function("() => document.getElementById('state-text').textContent === 'open'", timeout=WAIT_MS)


def test_page_shows_only_matching_scores_and_a_new_filter_changes_the_stream(
    browser_page: Any, gateway: Gateway, kafka: Kafka, route, tmp_path: Path
) -> None:
    page = browser_page
    topic = kafka.topic(partitions=PARTITIONS, prefix="filtered")
    route(path=DEMO_LIVE_ROUTE, topic=topic, initial="snapshot", client_filter=True)
    scores = Scores(kafka, topic)
    wheres: list[str] = []
    page.on(
        "request",
        lambda r: (
            wheres.append(parse_qs(urlsplit(r.url).query).get("where", [""])[0])
            if urlsplit(r.url).path == DEMO_LIVE_ROUTE
            else None
        ),
    )
    # Before the page opens: the snapshot gives each match's current state.
    scores.update("match-0", 12, (0, 0))
    scores.update("match-1", 20, (2, 1), "liga")
    scores.update("match-2", 35, (1, 1))

    page.goto(gateway.url + "/viewer/scores/")
    page.wait_for_function("() => (window.sluiceEvents || []).length >= 3", timeout=WAIT_MS)
    assert wheres == [""]  # no filter picked yet: every match
    assert page.text_content("#where") == "(none: every match)"

    # "At least 2 goals": match-1 (3 goals) and match-2 (2) match, match-0 (0) does not.
    filter_apply(page, goals=2, minute=0)
    assert wheres[-1] == "not exists(value) or (value.goals >= 2)"
    assert page.text_content("#where") == wheres[-1]
    wait_for_match(page, "match-2", 35)
    scores.update("match-0", 30, (1, 0))  # 1 goal: produced, never shown
    scores.update("match-2", 41, (2, 1))
    scores.update("match-0", 44, (1, 0))  # still 1
    scores.update("match-1", 50, (2, 2), "liga")
    scores.update("match-3", 5, (0, 0), "liga")  # a new match, 0 goals
    scores.update("match-0", 57, (2, 0))  # now 2: from here it matches
    for match, minute in [("match-2", 41), ("match-1", 50), ("match-0", 57)]:
        wait_for_match(page, match, minute)
    got = values_received(page)
    assert all(v["goals"] >= 2 for v in got), got
    assert sorted((v["match"], v["minute"]) for v in got) == [
        ("match-0", 57),
        ("match-1", 20),
        ("match-1", 50),
        ("match-2", 35),
        ("match-2", 41),
    ]
    # The board holds the matching matches only, each at its newest state.
    board = page.locator("#board tr[data-match]")
    assert sorted(board.evaluate_all("rows => rows.map(r => r.dataset.match)")) == ["match-0", "match-1", "match-2"]
    assert "2 \u2013 2" in page.text_content("#board tr[data-match='match-1']")
    assert "50'" in page.text_content("#board tr[data-match='match-1']")
    assert page.locator("#board tr[data-match='match-3']").count() == 0

    # A full-time tombstone passes `not exists(value)`: the ended match leaves the board.
    scores.full_time("match-2")
    page.wait_for_function("() => (window.sluiceEvents || []).some(e => e.type === 'delete')", timeout=WAIT_MS)
    page.wait_for_function("() => !document.querySelector(\"#board tr[data-match='match-2']\")", timeout=WAIT_MS)

    # A new filter, a new stream: minute >= 60 lets through a goalless match past the hour, and
    # keeps out the 2-goal match before it.
    filter_apply(page, goals=0, minute=60)
    assert wheres[-1] == "not exists(value) or (value.minute >= 60)"
    scores.update("match-3", 58, (0, 0), "liga")  # before the hour: never shown
    scores.update("match-0", 59, (3, 0))  # 3 goals, but before the hour: never shown
    scores.update("match-3", 62, (0, 0), "liga")  # 0 goals, past the hour: shown now
    scores.update("match-0", 66, (3, 1))
    wait_for_match(page, "match-3", 62)
    wait_for_match(page, "match-0", 66)
    got = values_received(page)
    assert all(v["minute"] >= 60 for v in got), got
    assert sorted((v["match"], v["minute"]) for v in got) == [("match-0", 66), ("match-3", 62)]
    assert page.locator("#board tr[data-match='match-3']").count() == 1
    assert page.locator("#board tr[data-match='match-1']").count() == 0  # minute 50: not in the new stream
    assert page.text_content("#state-text") == "open"
    assert page.errors == []

    target = SCREENSHOT if os.environ.get("SLUICE_UPDATE_SCREENSHOTS") else tmp_path / SCREENSHOT.name
    target.parent.mkdir(parents=True, exist_ok=True)
    page.locator("body").screenshot(path=str(target))
    assert target.stat().st_size > 10_000
