"""Streams asked by an event-stream client while Kafka is away: 200, ``retry`` and a reason, held, then served."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from streams.server.broker import topic_ensure
from tests.conftest import Gateway
from tests.streams.edge.test_wire import WAIT, error_body
from tests.support.kafka_proxy import ProxiedBroker

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
SSE = {"accept": "text/event-stream"}


async def test_held_while_kafka_is_away_then_delivered_from_the_asked_position(
    gateway_factory: Callable[..., Gateway], proxied: ProxiedBroker, route: Any
) -> None:
    topic_ensure(proxied.bootstrap, "held", 1)
    route(path="/held", topic="held", initial="earliest", heartbeat_seconds=1)
    gateway = gateway_factory(KAFKA_BOOTSTRAP_SERVERS=proxied.bootstrap, SLUICE_KAFKA_TIMEOUT="1")
    proxied.proxy_stop()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http:
        # Without text/event-stream in accept (a script, a probe): the explicit 503 as before.
        body = error_body(await http.get("/held"), 503, "kafka_unavailable")
        assert body["cause"] == "unreachable"
        async with http.stream("GET", "/held", headers=SSE) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            chunks = response.aiter_raw()
            head = await anext(chunks)
            assert head.startswith(b"retry: 2000\n: Kafka cluster default: ")
            assert b"waiting for Kafka" in head
            beat = await anext(chunks)
            assert beat == b":\n\n"
            proxied.proxy_start()
            from confluent_kafka import Producer

            producer = Producer({"bootstrap.servers": proxied.bootstrap, "log_level": 0})
            producer.produce("held", b"after the outage")
            assert producer.flush(WAIT) == 0
            seen = b""
            while b"data: after the outage" not in seen:
                seen += await anext(chunks)
            assert b"id: " in seen


async def test_held_stream_ends_cleanly_after_the_bound_and_final_causes_stay_503(
    gateway_factory: Callable[..., Gateway], proxied: ProxiedBroker, route: Any
) -> None:
    route(path="/bounded/{topic}", topic="${params.topic}", heartbeat_seconds=1)
    gateway = gateway_factory(
        KAFKA_BOOTSTRAP_SERVERS=proxied.bootstrap, SLUICE_KAFKA_TIMEOUT="1", SLUICE_UNAVAILABLE_HOLD_SECONDS="3"
    )
    proxied.proxy_stop()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=WAIT) as http:
        started = time.monotonic()
        response = await http.get("/bounded/anything", headers=SSE)
        took = time.monotonic() - started
        assert response.status_code == 200
        assert response.text.startswith("retry: 2000\n: ")
        assert 3 <= took < 3 + WAIT / 2  # held for the bound, then ended: the browser comes back after retry
    misconfigured = gateway_factory(
        KAFKA_BOOTSTRAP_SERVERS=proxied.broker.bootstrap,
        KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT",
        KAFKA_SASL_MECHANISM="PLAIN",
        KAFKA_SASL_USERNAME="u",
        KAFKA_SASL_PASSWORD="p",
        SLUICE_KAFKA_TIMEOUT="2",
    )
    async with httpx.AsyncClient(base_url=misconfigured.url, timeout=WAIT) as http:
        body = error_body(await http.get("/bounded/anything", headers=SSE), 503, "kafka_unavailable")
        assert body["cause"] == "authentication"  # needs an operator: final, even for a browser
