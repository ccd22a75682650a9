from __future__ import annotations

import httpx
import pytest

from tests.support.sse_client import EventParser

pytestmark = pytest.mark.services


async def test_stream_delivers_live_event(gateway, kafka, route) -> None:
    topic = kafka.topic(partitions=3)
    route(path="/smoke/{topic}", topic="${params.topic}")
    parser = EventParser()
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=10) as client,
        client.stream("GET", f"/smoke/{topic}") as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        chunks = response.aiter_raw()
        events = parser.feed(await anext(chunks))
        assert events
        assert not events[0].has_data  # the start checkpoint
        kafka.produce(topic, "hello", key="k", partition=1)
        data_events = []
        while not data_events:
            data_events = [e for e in parser.feed(await anext(chunks)) if e.has_data]
        assert data_events[0].data == "hello"
