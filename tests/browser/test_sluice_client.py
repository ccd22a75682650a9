"""``sluice.js`` in a real browser: eight routes over one HTTP/1.1 connection, and challenges answered for a minute.

The page loads the module from the gateway's stable static path, as a page of any
deployment would, and gets its tokens from the test through an exposed function.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import Gateway, Kafka
from tests.support.tokens import guard_fields, mint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 30_000
MODULE = "/static/sluice/sluice.js"


@pytest.fixture
def guard(stream_db: None) -> Callable[..., str]:
    from guards.services import guard_upsert

    def make(**overrides: Any) -> str:
        name = f"g-{uuid.uuid4().hex[:8]}"
        guard_upsert(name=name, **guard_fields(**overrides))
        return name

    return make


def test_eight_routes_in_one_stream_leave_the_page_its_connections(
    browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any
) -> None:
    page = browser_page
    tag = uuid.uuid4().hex[:6]
    paths = []
    for i in range(8):
        topic = kafka.topic()
        paths.append(f"/mux8/{tag}/{i}")
        route(path=paths[-1], topic=topic, initial="earliest", heartbeat_seconds=5)
        kafka.produce(topic, f"record of route {i}")
    gets: list[str] = []
    page.on("request", lambda r: gets.append(r.url) if r.method == "GET" and "/streams" in r.url else None)
    page.goto(f"{gateway.url}/healthz")

    # One multiplexed stream for all eight routes: every member delivers on one connection.
    page.evaluate(
        """async ([module, paths]) => {
            const {open} = await import(module);
            window.got = [];
            window.mux = open(paths.map((path, i) => ({alias: `r${i}`, path})), {onEvent: (e) => window.got.push(e)});
        }""",
        [MODULE, paths],
    )
    page.wait_for_function("window.got.length >= 8", timeout=WAIT_MS)
    got = page.evaluate("window.got.map((e) => [e.member, e.type, e.data])")
    assert sorted(got) == [[f"r{i}", "message", f"record of route {i}"] for i in range(8)]
    assert len(gets) == 1
    # Meanwhile the page's own requests, six at once, are answered.
    statuses = page.evaluate(
        "Promise.all(Array.from({length: 6}, (_, i) => fetch(`/healthz?n=${i}`).then((r) => r.status)))"
    )
    assert statuses == [200] * 6

    # The same eight routes as eight EventSources: six hold every connection the browser
    # keeps for the origin, the other two wait, and so does the page's next request.
    page.evaluate("window.mux.close()")
    page.evaluate("(paths) => { window.sources = paths.map((path) => new EventSource(path)); }", paths)
    page.wait_for_function("window.sources.filter((s) => s.readyState === EventSource.OPEN).length === 6")
    starved = page.evaluate(
        """async () => {
            window.late = fetch('/healthz?late').then((r) => r.status);
            const verdict = await Promise.race([window.late.then(() => 'answered'),
                                                new Promise((done) => setTimeout(() => done('pending'), 3000))]);
            return {verdict, waiting: window.sources.filter((s) => s.readyState === EventSource.CONNECTING).length};
        }"""
    )
    assert starved == {"verdict": "pending", "waiting": 2}
    page.evaluate("window.sources.forEach((s) => s.close())")
    assert page.evaluate("window.late") == 200  # answered once the connections are given back
    assert page.errors == []


class Ticker:
    """``tick-N`` into each topic every 200 ms until stopped."""

    def __init__(self, kafka: Kafka, topics: list[str]) -> None:
        self.kafka, self.topics = kafka, topics
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for topic in self.topics:
                self.kafka.produce(topic, f"tick-{self.count}", flush=False)
            self.kafka.flush()
            self.count += 1

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


LIFETIME = 10
KEEP_ALIVE = 60


def test_challenges_keep_plain_and_multiplexed_streams_alive_and_a_failing_token_ends_them_at_exp(
    browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any, guard: Callable[..., str]
) -> None:
    page = browser_page
    tag, name = uuid.uuid4().hex[:6], guard(challenge=3)
    guarded, public = kafka.topic(), kafka.topic()
    route(path=f"/live/{tag}/guarded", topic=guarded, guard=name, roles=["read:items"], heartbeat_seconds=5)
    route(path=f"/live/{tag}/public", topic=public, heartbeat_seconds=5)
    issued: list[int] = []

    def token_mint() -> str:
        issued.append(int(time.time()) + LIFETIME)
        return mint(exp=issued[-1])

    gets: dict[str, int] = {"plain": 0, "mux": 0}

    def count(request: Any) -> None:
        if request.method == "GET" and f"/live/{tag}/guarded" in request.url:
            gets["plain"] += 1
        elif request.method == "GET" and "/streams" in request.url:
            gets["mux"] += 1

    page.on("request", count)
    page.expose_function("tokenMint", token_mint)
    page.goto(f"{gateway.url}/healthz")
    with Ticker(kafka, [guarded, public]) as ticker:
        page.evaluate(
            """async ([module, tag]) => {
                const {open} = await import(module);
                window.tokenFails = false;
                const token = async () => {
                    if (window.tokenFails) throw new Error("the identity provider refused");
                    return await window.tokenMint();
                };
                window.report = {};
                const follow = (name, routes) => {
                    const seen = window.report[name] = {last: -1, members: {}, answered: 0, errors: [], state: ""};
                    return open(routes, {
                        token,
                        onEvent: (e) => {
                            const n = Number(e.data.split("-")[1]);
                            seen.last = Math.max(seen.last, n);
                            seen.members[e.member] = Math.max(seen.members[e.member] ?? -1, n);
                        },
                        onChallenge: (c) => { if (c.answered) seen.answered += 1; },
                        onError: (error) => seen.errors.push({kind: error.kind, message: error.message}),
                        onState: (state) => { seen.state = state; seen.stateAt = Date.now() / 1000; },
                    });
                };
                follow("plain", `/live/${tag}/guarded`);
                follow("mux", [{alias: "mine", path: `/live/${tag}/guarded`},
                               {alias: "all", path: `/live/${tag}/public`}]);
            }""",
            [MODULE, tag],
        )
        # A tick produced a minute after the start reaches both streams: six tokens' lives later.
        beyond = KEEP_ALIVE * 5
        page.wait_for_function(
            f"""() => window.report.plain.last >= {beyond} && window.report.mux.members.mine >= {beyond}
                     && window.report.mux.members.all >= {beyond}""",
            timeout=(KEEP_ALIVE + 30) * 1000,
        )
        report = page.evaluate("window.report")
        assert gets == {"plain": 1, "mux": 1}  # kept open by challenges, never reopened
        assert report["plain"]["answered"] >= KEEP_ALIVE // LIFETIME
        assert report["mux"]["answered"] >= KEEP_ALIVE // LIFETIME
        assert report["plain"]["errors"] == report["mux"]["errors"] == []

        # The token source fails: the next challenge goes unanswered, the streams end at exp,
        # and reopening them needs a token the page cannot get: both stop and say why.
        page.evaluate("window.tokenFails = true")
        failing_from = time.time()
        page.wait_for_function(
            "window.report.plain.state === 'closed' && window.report.mux.state === 'closed'",
            timeout=(LIFETIME + 30) * 1000,
        )
        report = page.evaluate("window.report")
        assert ticker.count > beyond
    last_exp = max(exp for exp in issued if exp <= failing_from + LIFETIME)
    for name in ("plain", "mux"):
        errors = report[name]["errors"]
        assert {"kind": "token", "message": "the identity provider refused"} in errors, errors
        assert report[name]["stateAt"] >= last_exp - 1  # not before the last good token's exp
    assert page.errors == []
