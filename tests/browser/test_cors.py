"""Cross-origin streams in headless Chromium: a page on another port opens streams on the gateway.

An EventSource follows the routes that allow the page's origin; a route that does
not is refused, and a page using ``sluice.js`` shows why in its console while the
gateway logs the refusal once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.conftest import Gateway, Kafka
from tests.guards.test_admission_wire import guard  # noqa: F401 (fixture)
from tests.support.tokens import mint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 20_000

PAGE = b"""<!doctype html><meta charset="utf-8"><title>another origin</title>
<script>
window.results = {};
function watch(name, url, options) {
  const result = window.results[name] = {events: [], state: "connecting"};
  const source = new EventSource(url, options || {});
  source.onopen = () => { result.state = "open"; };
  source.onmessage = (e) => { result.events.push(e.data); };
  source.onerror = () => { result.state = source.readyState === EventSource.CLOSED ? "closed" : "error"; };
}
</script>"""


class PageHandler(BaseHTTPRequestHandler):
    page = PAGE  # what the other origin serves

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def other_origin() -> Iterator[str]:
    """A page on a port of its own: another origin than the gateway (same site, so cookies still go along)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def state(page: Any, name: str, want: str) -> None:
    page.wait_for_function(
        "([n, s]) => window.results[n] && window.results[n].state === s", arg=[name, want], timeout=WAIT_MS
    )


def test_cross_origin_event_source_with_and_without_cors(
    browser_page: Any,
    gateway: Gateway,
    kafka: Kafka,
    route: Any,
    other_origin: str,
    guard: Callable[..., str],  # noqa: F811 (the fixture imported above)
) -> None:
    page = browser_page
    topic = kafka.topic()
    kafka.produce(topic, "hello across origins", key="k")
    allowed, refused, cookie = (f"/xo/{uuid.uuid4().hex[:8]}" for _ in range(3))
    route(path=allowed, topic=topic, initial="earliest", allow_origins=[other_origin])
    route(path=refused, topic=topic, initial="earliest", allow_origins=["https://somewhere.else"])
    route(
        path=cookie,
        topic=topic,
        initial="earliest",
        allow_origins=[other_origin],
        allow_credentials=True,
        guard=guard(cookie_name="jwt"),
        roles=["read:items"],
    )
    page.context.add_cookies([{"name": "jwt", "value": mint(), "url": gateway.url}])
    page.goto(other_origin + "/")
    page.evaluate("url => watch('allowed', url)", gateway.url + allowed)
    page.evaluate("url => watch('refused', url)", gateway.url + refused)
    page.evaluate("url => watch('cookie', url, {withCredentials: true})", gateway.url + cookie)
    page.evaluate("url => watch('no-cookie', url)", gateway.url + cookie)

    page.wait_for_function("() => window.results.allowed.events.length >= 1", timeout=WAIT_MS)
    page.wait_for_function("() => window.results.cookie.events.length >= 1", timeout=WAIT_MS)
    state(page, "refused", "closed")  # the browser blocked the answer: no CORS headers for this origin
    state(page, "no-cookie", "closed")  # without credentials mode, no cookie: 401
    results = page.evaluate("window.results")
    assert results["allowed"]["events"] == ["hello across origins"]
    assert results["cookie"]["events"] == ["hello across origins"]
    assert results["refused"]["events"] == []
    assert results["no-cookie"]["events"] == []


REFUSED_PAGE = """<!doctype html><meta charset="utf-8"><title>a shop the route does not allow</title>
<script type="module">
  import {{ open }} from "{gateway}/static/sluice/sluice.js";
  window.refusals = [];
  window.follow = (path) => open(path, {{
    base: "{gateway}",
    onError: (e) => {{ window.refusals.push(e); console.error(`sluice: ${{e.message}}`); }},
  }});
  window.ready = true;
</script>"""


def test_a_page_on_an_origin_the_route_refuses_says_why_in_its_console(
    browser_page: Any, gateway: Gateway, kafka: Kafka, route: Any, other_origin: str
) -> None:
    page = browser_page
    path = f"/xo-refused/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=kafka.topic(), allow_origins=["https://somewhere.else"])
    PageHandler.page = REFUSED_PAGE.format(gateway=gateway.url).encode()
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text) if message.type == "error" else None)
    try:
        page.goto(other_origin + "/")
        page.wait_for_function("window.ready === true", timeout=WAIT_MS)
        for _ in range(3):  # the page tries again and again: the gateway's log says it once
            page.evaluate("(path) => window.follow(path)", path)
        page.wait_for_function("window.refusals.length >= 3", timeout=WAIT_MS)
    finally:
        PageHandler.page = PAGE
    said = f"origin {other_origin} is not allowed on route {path}"
    assert [text for text in console if said in text] == [
        f"sluice: {said}: add it to the route's allow_origins "
        "(or to SLUICE_CORS_ALLOW_ORIGINS, which routes without allow_origins inherit)"
    ] * 3
    refusal = page.evaluate("window.refusals[0]")
    assert (refusal["kind"], refusal["status"], refusal["error"], refusal["fatal"]) == (
        "refused",
        403,
        "origin_not_allowed",
        True,
    )
    time.sleep(0.5)
    lines = [line for line in list(gateway.output) if '"event":"origin_refused"' in line and path in line]
    assert len(lines) == 1, lines
    assert f'"origin":"{other_origin}"' in lines[0]
