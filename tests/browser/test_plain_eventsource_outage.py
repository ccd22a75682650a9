"""A plain ``EventSource`` (no Sluice page code) survives a broker outage and a gateway restart within it.

The page is nothing but ``new EventSource(url)`` and an ``onmessage`` that keeps what
arrives. The broker is put out of reach (its ``tansu proxy`` stopped) for
``OUTAGE_SECONDS``; meanwhile the gateway restarts; then the broker comes back. The
page ends with every record, in order, none twice, and no reload. The "before": with
streams not held (``SLUICE_UNAVAILABLE_HOLD_SECONDS=0``, a 503 as Sluice answered it
before), the same page is closed for good.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from streams.server.broker import topic_ensure
from tests.conftest import Gateway
from tests.support.kafka_proxy import ProxiedBroker

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OUTAGE_SECONDS = float(os.environ.get("SLUICE_BROWSER_OUTAGE_SECONDS", "30"))
WAIT_MS = 60_000
PAGE = """
window.got = [];
window.source = new EventSource(%s);
window.source.onmessage = (event) => window.got.push(event.data);
"""


def produce(producer: Producer, topic: str, numbers: range, *, wait: bool = True) -> list[str]:
    values = [f"record-{n:03d}" for n in numbers]
    for value in values:
        producer.produce(topic, value.encode())
    if wait:
        assert producer.flush(60) == 0
    else:
        producer.poll(0)  # the broker is out of reach: they wait in the producer's queue
    return values


def page_open(page: Any, gateway: Gateway, path: str) -> None:
    page.goto(f"{gateway.url}/healthz")  # any page of the gateway's origin
    page.add_script_tag(content=PAGE % repr(path))


def outage_setup(
    page: Any, gateway_factory: Callable[..., Gateway], proxied: ProxiedBroker, route: Any, name: str, hold: str
) -> tuple[Gateway, Producer, str]:
    """A topic, its route, a gateway reading it through the proxy, and the page's EventSource open on it."""
    topic = f"browser-{name}"
    topic_ensure(proxied.bootstrap, topic, 1)
    route(path=f"/plain/{name}", topic=topic, heartbeat_seconds=2)
    gateway = gateway_factory(
        KAFKA_BOOTSTRAP_SERVERS=proxied.bootstrap, SLUICE_KAFKA_TIMEOUT="2", SLUICE_UNAVAILABLE_HOLD_SECONDS=hold
    )
    producer = Producer({"bootstrap.servers": proxied.bootstrap, "linger.ms": 1, "log_level": 0})
    page_open(page, gateway, f"/plain/{name}")
    page.wait_for_function("window.source.readyState === 1", timeout=WAIT_MS)
    return gateway, producer, topic


def received(page: Any, values: list[str]) -> None:
    page.wait_for_function("want => window.got.length >= want.length", arg=values, timeout=WAIT_MS)


def test_plain_eventsource_gets_everything_across_an_outage_and_a_restart(
    browser_page: Any, gateway_factory: Callable[..., Gateway], proxied: ProxiedBroker, route: Any
) -> None:
    page = browser_page
    gateway, producer, topic = outage_setup(page, gateway_factory, proxied, route, "outage", hold="10")
    expected = produce(producer, topic, range(0, 20))
    received(page, expected)

    proxied.proxy_stop()
    cut = time.monotonic()
    expected += produce(producer, topic, range(20, 30), wait=False)
    time.sleep(min(3.0, OUTAGE_SECONDS / 3))
    gateway.restart()  # the page's stream breaks; it reconnects to a gateway that cannot reach Kafka
    while time.monotonic() - cut < OUTAGE_SECONDS:
        assert page.evaluate("window.source.readyState") != 2, "the EventSource gave up"
        time.sleep(1)
    proxied.proxy_start()
    assert producer.flush(60) == 0
    expected += produce(producer, topic, range(30, 45))
    received(page, expected)
    time.sleep(1)  # anything repeated would arrive right behind
    assert page.evaluate("window.got") == expected
    assert page.evaluate("window.source.readyState") in (0, 1)


def test_before_a_503_closes_a_plain_eventsource_for_good(
    browser_page: Any, gateway_factory: Callable[..., Gateway], proxied: ProxiedBroker, route: Any
) -> None:
    page = browser_page
    gateway, producer, topic = outage_setup(page, gateway_factory, proxied, route, "before", hold="0")
    received(page, produce(producer, topic, range(0, 5)))
    proxied.proxy_stop()
    gateway.restart()
    page.wait_for_function("window.source.readyState === 2", timeout=WAIT_MS)  # CLOSED: a 503 ends it
    proxied.proxy_start()
    produce(producer, topic, range(5, 10))
    time.sleep(5)
    assert page.evaluate("window.source.readyState") == 2
    assert len(page.evaluate("window.got")) == 5  # nothing after the outage, and it will not try again
