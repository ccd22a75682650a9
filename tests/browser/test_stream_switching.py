"""Switching streams on the landing page and in the viewer: what the page shows is always the open stream's.

A route with parameters clicked on the landing page stops the old stream (its path waits in the box,
the parameter selected to type over); a new stream starts with no last id of the old one; the
viewer's "Open set" describes the set it opened, not the route its menu shows.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.browser.conftest import page_events
from tests.conftest import Gateway, Kafka

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 20_000
NO_ID = "\u2013"  # what the page shows before a stream's first id
SELECTED = (
    "() => { const b = document.getElementById('path'); return b.value.slice(b.selectionStart, b.selectionEnd); }"
)


def wait_for_state(page: Any, text: str) -> None:
    page.wait_for_function("t => document.getElementById('state-text').textContent === t", arg=text, timeout=WAIT_MS)


def test_a_route_with_parameters_stops_the_old_stream(
    browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any
) -> None:
    page, tag = browser_page, uuid.uuid4().hex[:6]
    topic = kafka.topic(prefix="switch")
    first = route(path=f"/switch-{tag}/all", topic=topic, order=-1000, initial="live")
    templated = route(path=f"/switch-{tag}/leagues/{{league}}", topic=topic, order=-999)
    page.goto(gateway.url + "/")
    assert page.input_value("#path") == first.path
    wait_for_state(page, "open")
    kafka.produce(topic, "before the switch")
    page.wait_for_function("() => (window.sluiceEvents || []).length >= 1", timeout=WAIT_MS)

    page.click(f"a.route[data-path='{templated.path}']")
    assert page.input_value("#path") == templated.path
    assert page.text_content("#state-text") == "replace {league} in the path, then Open"
    assert page.evaluate("window.sluiceSource") is None
    assert page.evaluate(SELECTED) == "{league}"
    assert page.text_content("#last-id") == NO_ID
    assert page.text_content("#count") == "0"
    kafka.produce(topic, "after the switch")
    page.wait_for_timeout(1500)  # the old stream, were it still open, would have shown it by now
    assert page_events(page) == []
    page.click("#open")  # still unfilled: nothing opens
    assert page.evaluate("window.sluiceSource") is None
    assert page.errors == []


def test_a_new_stream_starts_with_no_last_id(browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any) -> None:
    page, tag = browser_page, uuid.uuid4().hex[:6]
    busy, quiet = kafka.topic(prefix="switch-busy"), kafka.topic(prefix="switch-quiet")
    route(path=f"/switch-{tag}/busy", topic=busy, order=-1000, initial="live")
    other = route(path=f"/switch-{tag}/quiet", topic=quiet, order=-999, initial="live")
    page.goto(gateway.url + "/")
    wait_for_state(page, "open")
    kafka.produce(busy, "one")
    page.wait_for_function("() => (window.sluiceEvents || []).length >= 1", timeout=WAIT_MS)
    assert page.text_content("#last-id") == page_events(page)[-1]["id"]

    page.fill("#path", other.path)
    page.click("#open")
    wait_for_state(page, "open")
    assert page.text_content("#last-id") == NO_ID
    assert page.text_content("#count") == "0"
    kafka.produce(quiet, "two")
    page.wait_for_function("() => (window.sluiceEvents || []).length >= 1", timeout=WAIT_MS)
    assert page_events(page)[-1]["data"] == "two"
    assert page.text_content("#last-id") == page_events(page)[-1]["id"]
    assert page.errors == []


def test_open_set_describes_every_member(browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any) -> None:
    page, tag = browser_page, uuid.uuid4().hex[:6]
    topic = kafka.topic(prefix="switch-set")
    scores = route(path=f"/switch-set-{tag}/scores", topic=topic, description="every score")
    league = route(path=f"/switch-set-{tag}/leagues/{{league}}", topic=topic, description="one league")
    page.goto(f"{gateway.url}/viewer/?route={scores.pk}")
    page.click("#add")
    page.select_option("#route", str(league.pk))
    page.fill("#params input[data-param='league']", "liga")
    page.click("#add")
    page.click("#open-set")
    wait_for_state(page, "open")
    info = page.text_content("#route-info") or ""
    assert f"0: {scores.path} (sse-kafka · guard: no · every score)" in info
    assert f"1: /switch-set-{tag}/leagues/liga (sse-kafka · guard: no · one league)" in info

    page.select_option("#route", str(scores.pk))  # another route chosen: the set is closed, the menu's route described
    assert page.text_content("#state-text") == "idle"
    assert page.text_content("#route-info") == "sse-kafka · guard: no · every score"
    page.click("#open")
    wait_for_state(page, "open")
    assert page.text_content("#route-info") == "sse-kafka · guard: no · every score"
    assert page.errors == []
