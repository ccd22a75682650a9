"""``sluice.js`` loaded by a page of another origin: a site on its own port, the gateway on another.

The site's page loads the client from the gateway (the versioned URL with its
Subresource Integrity hash, and the stable path by ``import()``), follows routes that
allow the site's origin, one and several in one stream, and a guarded route whose
``token()`` asks the site's own backend for short-lived tokens.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from streams.server.client_package import package_read
from tests.browser.test_sluice_client import (
    Ticker,
    guard,  # noqa: F401 (fixture)
)
from tests.conftest import Gateway, Kafka
from tests.support.tokens import mint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 30_000
LIFETIME = 6  # seconds a token of the site's backend lives; the guard challenges 3 s before exp

# A module is fetched once per URL: the copy with a wrong hash needs a URL of its own (``?pin``).
PAGE = """<!doctype html><meta charset="utf-8"><title>a shop</title>
<script type="module" src="{gateway}{versioned}" integrity="{integrity}" crossorigin="anonymous"
        onload="window.pinned = 'loaded'" onerror="window.pinned = 'refused'"></script>
<script type="module" src="{gateway}/static/sluice/sluice.js?pin" integrity="sha384-{wrong}" crossorigin="anonymous"
        onload="window.mispinned = 'loaded'" onerror="window.mispinned = 'refused'"></script>
<script type="module">
  // The pinned URL again: fetched once, checked against the hash above.
  import {{ open }} from "{gateway}{versioned}";
  window.stable = await import("{gateway}/static/sluice/sluice.js");
  const token = async () => (await fetch("/token")).text();
  window.seen = {{}};
  window.follow = (name, routes) => {{
    const seen = window.seen[name] = {{events: [], answered: 0, errors: []}};
    return open(routes, {{
      base: "{gateway}",
      token,
      onEvent: (e) => seen.events.push([e.member, e.data]),
      onChallenge: (c) => {{ if (c.answered) seen.answered += 1; }},
      onError: (e) => seen.errors.push(e.message),
    }});
  }};
  window.ready = true;
</script>"""


class Site:
    """A site's origin: its page, and its backend's token endpoint (tokens its own keys sign)."""

    def __init__(self) -> None:
        self.page = b""
        self.tokens: list[int] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/token":
                    site.tokens.append(int(time.time()) + LIFETIME)
                    body, kind = mint(exp=site.tokens[-1], scope="read:items").encode(), "text/plain"
                else:
                    body, kind = site.page, "text/html; charset=utf-8"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def site(gateway: Gateway) -> Iterator[Site]:
    site = Site()
    package = package_read()
    versioned = f"/client/sluice@{package.version}/sluice.js"
    site.page = PAGE.format(
        gateway=gateway.url,
        versioned=versioned,
        integrity=package.files["sluice.js"].integrity,
        wrong="A" * 64,
    ).encode()
    threading.Thread(target=site.server.serve_forever, daemon=True).start()
    yield site
    site.server.shutdown()
    site.server.server_close()


def test_a_page_of_another_origin_loads_the_client_and_follows_routes(
    browser_page: Any,
    gateway: Gateway,
    kafka: Kafka,
    route: Any,
    site: Site,
    guard: Callable[..., str],  # noqa: F811 (the fixture imported above)
) -> None:
    page = browser_page
    tag = uuid.uuid4().hex[:6]
    topics = [kafka.topic() for _ in range(3)]
    paths = [f"/xo-client/{tag}/{name}" for name in ("scores", "news", "mine")]
    for path, topic in zip(paths[:2], topics, strict=False):
        route(path=path, topic=topic, initial="earliest", heartbeat_seconds=5, allow_origins=[site.origin])
    route(
        path=paths[2],
        topic=topics[2],
        guard=guard(challenge=3),
        roles=["read:items"],
        heartbeat_seconds=5,
        allow_origins=[site.origin],
    )
    kafka.produce(topics[0], "first score")
    kafka.produce(topics[1], "first news")
    gets: list[str] = []
    page.on("request", lambda r: gets.append(r.url) if r.method == "GET" and "/streams" in r.url else None)

    page.goto(site.origin + "/")
    page.wait_for_function("window.ready === true && window.pinned && window.mispinned", timeout=WAIT_MS)
    # The versioned URL loads with its integrity hash; a hash that does not match is refused.
    assert page.evaluate("[window.pinned, window.mispinned]") == ["loaded", "refused"]
    assert page.evaluate("typeof window.stable.open") == "function"  # the stable path, by import()

    # One route, then three routes in one stream, the guarded one among them.
    page.evaluate("(path) => { window.single = window.follow('single', path); }", paths[0])
    page.wait_for_function("window.seen.single.events.length >= 1", timeout=WAIT_MS)
    assert page.evaluate("window.seen.single.events") == [[None, "first score"]]
    with Ticker(kafka, [topics[2]]) as ticker:
        page.evaluate(
            "(paths) => { window.mux = window.follow('mux', paths.map((path, i) => ({alias: `m${i}`, path}))); }",
            paths,
        )
        page.wait_for_function("window.seen.mux.events.length >= 3", timeout=WAIT_MS)
        # The guarded member keeps going past two of its tokens' lifetimes, on the same connection.
        started = ticker.count
        beyond = started + int(2.5 * LIFETIME / 0.2)
        page.wait_for_function(
            f"window.seen.mux.events.some(([m, d]) => m === 'm2' && Number(d.split('-')[1]) >= {beyond})",
            timeout=(3 * LIFETIME + 20) * 1000,
        )
    seen = page.evaluate("window.seen")
    members = {member for member, _ in seen["mux"]["events"]}
    assert members == {"m0", "m1", "m2"}
    assert ["m0", "first score"] in seen["mux"]["events"]
    assert ["m1", "first news"] in seen["mux"]["events"]
    assert seen["mux"]["answered"] >= 2
    assert seen["single"]["errors"] == seen["mux"]["errors"] == []
    assert len(gets) == 1  # challenges kept the multiplexed stream open: it was never reopened
    assert len(site.tokens) >= 3  # the first token, and one for each challenge answered
    page.evaluate("window.single.close(); window.mux.close()")
    assert page.errors == []
