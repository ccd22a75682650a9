"""Per-address stream limits (``SLUICE_MAX_STREAMS_PER_ADDRESS``): 429 with ``retry-after`` and a JSON body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway
from tests.streams.edge.test_wire import WAIT, error_body
from tests.streams.server.test_shutdown import raw_stream
from tests.support.polling import condition_wait_async

pytestmark = pytest.mark.services


async def test_an_address_at_its_limit_gets_429_until_it_closes_a_stream(
    gateway_factory: Callable[..., Gateway], kafka: Any, route: Any
) -> None:
    topic = kafka.topic()
    route(path="/limited/{topic}", topic="${params.topic}", heartbeat_seconds=3600)
    gateway = gateway_factory(SLUICE_MAX_STREAMS_PER_ADDRESS="3")
    path = f"/limited/{topic}"
    held = [await raw_stream(gateway.port, path) for _ in range(3)]
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        refused = await http.get(path)
        body = error_body(refused, 429, "too_many_streams")
        assert "3 open streams" in body["detail"]
        assert int(refused.headers["retry-after"]) > 0
        # Other requests from the address are not streams and are not counted.
        assert (await http.get("/healthz")).status_code == 200
        _, writer = held.pop()
        writer.close()

        async def admitted() -> bool:
            async with http.stream("GET", path) as response:
                return response.status_code == 200

        await condition_wait_async(admitted, within=WAIT, what="a stream admitted once one closed")
    for _, writer in held:
        writer.close()
