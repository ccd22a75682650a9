"""The demo page in a real browser: it gets a token, streams a guarded route and answers challenges with fetch.

The token lives 6 s and the guard challenges 3 s before exp, so the stream has to be
extended twice to still be receiving after the first token's exp; the page must do it
on the same EventSource (one GET), each answer a POST of a fresh token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.browser.conftest import page_events
from tests.conftest import Gateway, Kafka

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 30_000
LIFETIME = 6
CHALLENGE = 3
PASSWORD = "a-password-for-the-browser-test"


class Ticker:
    """Produces ``tick-N`` every 200 ms until stopped, so there is always something to receive."""

    def __init__(self, kafka: Kafka, topic: str) -> None:
        self.kafka, self.topic = kafka, topic
        self.sent: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(0.2):
            value = f"tick-{n}"
            self.kafka.produce(self.topic, value, key="k")
            self.sent.append((time.time(), value))
            n += 1

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def demo_gateway(gateway_factory: Callable[..., Gateway], tmp_path: Path) -> Gateway:
    """A gateway with the development issuer on, its key registered as the demo guard (as --demo does)."""
    from guards.issuer import issuer_key_ensure
    from guards.services import dev_guard_ensure

    key_file = tmp_path / "issuer.pem"
    dev_guard_ensure(key=issuer_key_ensure(key_file), challenge=CHALLENGE)
    return gateway_factory(SLUICE_DEV_ISSUER="1", SLUICE_DEV_ISSUER_KEY_FILE=str(key_file))


def test_page_answers_challenges_and_outlives_its_first_token(
    browser_page: Any, demo_gateway: Gateway, kafka: Kafka, route, django_user_model: Any
) -> None:
    page = browser_page
    topic = kafka.topic(prefix="secure")
    path = f"/secure/{topic}"
    route(path=path, topic=topic, order=-1000, guard="demo", roles=["scores:read"], description="guarded")
    # Hashed for the gateway's own settings (the test settings hash with MD5, which it does not accept).
    password = PBKDF2PasswordHasher().encode(PASSWORD, PBKDF2PasswordHasher().salt())
    django_user_model.objects.create(username="ada", password=password, is_staff=True)

    stream_gets: list[str] = []
    answers: list[int] = []
    page.on("request", lambda r: stream_gets.append(r.url) if r.method == "GET" and path in r.url else None)
    page.on(
        "response",
        lambda r: answers.append(r.status) if r.request.method == "POST" and r.url.endswith(path) else None,
    )

    page.goto(f"{demo_gateway.url}/admin/login/?next=/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{demo_gateway.url}/")
    assert page.get_attribute(f"a.route[data-path='{path}']", "data-guarded") == "1"

    page.fill("#token-lifetime", str(LIFETIME))
    stream_gets.clear()  # the page opened the route on load with a 60 s token; start again with a short one
    page.click(f"a.route[data-path='{path}']")
    page.wait_for_function("() => document.getElementById('state-text').textContent === 'open'", timeout=WAIT_MS)
    first_exp = page.evaluate("window.sluiceToken.expiresAt()")
    assert first_exp - time.time() <= LIFETIME

    with Ticker(kafka, topic) as ticker:
        page.wait_for_function("() => window.sluiceToken.answered() >= 2", timeout=WAIT_MS)
        page.wait_for_function(
            "exp => Date.now() / 1000 > exp + 1", arg=first_exp, timeout=WAIT_MS
        )  # past the first token's exp, with a margin for clock reading
        mark = len(ticker.sent)
        page.wait_for_function(
            "n => (window.sluiceEvents || []).filter(e => e.data.startsWith('tick-')).length > n",
            arg=mark,
            timeout=WAIT_MS,
        )
    received = [e["data"] for e in page_events(page)]
    sent = [value for _, value in ticker.sent]
    late = [value for at, value in ticker.sent if at > first_exp + 1]
    assert late
    assert late[0] in received
    assert received == sent[: len(received)]  # in order, nothing lost or repeated on the way
    assert page.text_content("#challenges-answered") == str(page.evaluate("window.sluiceToken.answered()"))
    assert int(page.get_attribute("#token-expiry", "data-left")) > 0  # the countdown shows the newest token
    # One EventSource all along (extended, not reconnected); every challenge answered with 204.
    assert len(stream_gets) == 1
    assert len(answers) >= 2
    assert set(answers) == {204}
    assert page.errors == []
