"""Quiet streams get keep-alives; skipped traffic moves the client's last id forward."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from streams.core.ids import progress_decode
from tests.support.sse_client import EventParser

pytestmark = pytest.mark.services


async def test_heartbeat_then_checkpoint_after_filtered_traffic(gateway, kafka, route) -> None:
    topic = kafka.topic(partitions=2)
    route(
        path="/hb/{topic}/{key}",
        topic="${params.topic}",
        heartbeat_seconds=1,
        filters=[{"key": "${params.key}"}],
    )
    parser = EventParser()
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=10) as client,
        client.stream("GET", f"/hb/{topic}/mine") as response,
    ):
        assert response.status_code == 200
        chunks = response.aiter_raw()
        parser.feed(await anext(chunks))
        start = progress_decode(parser.last_id or "")
        assert start == {0: 0, 1: 0}

        async def until(condition) -> None:
            while not condition():
                parser.feed(await asyncio.wait_for(anext(chunks), timeout=10))

        # Nothing happens: a comment arrives, the last id stays.
        await until(lambda: parser.comments >= 1)
        assert progress_decode(parser.last_id or "") == start

        # Someone else's message is skipped, but the next heartbeat carries the new position.
        kafka.produce(topic, "not for me", key="theirs", partition=1)
        await until(lambda: progress_decode(parser.last_id or "") == {0: 0, 1: 1})

        # A message for this stream arrives with an id past both.
        kafka.produce(topic, "for me", key="mine", partition=0)
        events: list = []
        while not events:
            events = [e for e in parser.feed(await asyncio.wait_for(anext(chunks), timeout=10)) if e.has_data]
        assert events[0].data == "for me"
        assert progress_decode(events[0].id or "") == {0: 1, 1: 1}
