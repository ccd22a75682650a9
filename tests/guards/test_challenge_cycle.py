"""A full challenge cycle against the real gateway (SPEC 4.3), with the timings the promise names.

A 6-second token and ``challenge: 3``: the answering stream is extended and keeps receiving
past the old ``exp``; the silent stream ends within a second of its ``exp`` and receives
nothing produced after it. A response extends every stream of its identity at once, and a
response of another identity extends none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.guards.test_admission_wire import bearer, challenge_response, client, guard, stream_end  # noqa: F401
from tests.streams.edge.test_wire import Stream, open_stream
from tests.support.tokens import mint

pytestmark = pytest.mark.services

LIFETIME = 6
CHALLENGE = 3
END_BOUND = 1.0  # seconds after exp by which an unanswered stream has ended


class Ticker:
    """Produces ``n:<time>`` every 100 ms, remembering when each was produced."""

    def __init__(self, kafka: Any, topic: str) -> None:
        self.kafka, self.topic = kafka, topic
        self.produced: dict[str, float] = {}

    async def run(self) -> None:
        n = 0
        while True:
            value = f"n{n}"
            self.produced[value] = time.time()
            self.kafka.produce(self.topic, value, key="k")
            n += 1
            await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def ticking(kafka: Any, topic: str) -> AsyncIterator[Ticker]:
    ticker = Ticker(kafka, topic)
    task = asyncio.ensure_future(ticker.run())
    try:
        yield ticker
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def messages(stream: Stream) -> list[str]:
    return [e.data for e in stream.messages if e.type == "message"]


async def test_answered_stream_goes_on_and_silent_stream_ends_at_exp(
    client: httpx.AsyncClient,  # noqa: F811
    kafka: Any,
    route: Any,
    guard: Callable[..., str],  # noqa: F811
) -> None:
    topic, path = kafka.topic(), f"/cycle/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, guard=guard(challenge=CHALLENGE), roles=["read:items"], heartbeat_seconds=3600)
    exp = int(time.time()) + LIFETIME
    async with (
        open_stream(client, path, headers=bearer(mint(sub="alice", exp=exp))) as answering,
        open_stream(client, path, headers=bearer(mint(sub="bob", exp=exp))) as silent,
        ticking(kafka, topic) as ticker,
    ):
        await answering.started()
        await silent.started()
        await answering.read_until(lambda s: any(e.type == "challenge" for e in s.events))
        challenged = time.time()
        assert exp - CHALLENGE - 0.5 <= challenged < exp
        response = await client.post(path, headers=challenge_response(mint(sub="alice", exp=exp + LIFETIME)))
        assert response.status_code == 204

        ended = await stream_end(silent)
        assert exp <= ended + 0.5  # the timer's clock and the wall clock may differ a little
        assert ended - exp < END_BOUND
        late_for_silent = [v for v in messages(silent) if ticker.produced[v] > exp]
        assert late_for_silent == []
        assert any(challenge.type == "challenge" for challenge in silent.events)  # it was asked, and kept quiet

        # The answering stream keeps receiving what is produced after the old exp.
        await answering.read_until(lambda s: any(ticker.produced[v] > exp + 1 for v in messages(s)))
    received = messages(answering)
    assert received == sorted(received, key=lambda v: int(v[1:]))  # in order
    assert len(set(received)) == len(received)


async def test_one_response_extends_all_streams_of_its_identity_and_no_others(
    client: httpx.AsyncClient,  # noqa: F811
    kafka: Any,
    route: Any,
    guard: Callable[..., str],  # noqa: F811
) -> None:
    name, topic, base = guard(challenge=1), kafka.topic(), f"/cycle-three/{uuid.uuid4().hex[:8]}"
    for n in range(3):
        route(path=f"{base}/{n}", topic=topic, guard=name, roles=["read:items"], heartbeat_seconds=3600)
    old = int(time.time()) + 5
    new = old + 4
    async with contextlib.AsyncExitStack() as stack:
        alice = [
            await stack.enter_async_context(open_stream(client, f"{base}/{n}", headers=bearer(mint(exp=old))))
            for n in range(3)
        ]
        for stream in alice:
            await stream.started()
        # Another identity's valid token: accepted, and it moves none of alice's streams.
        response = await client.post(f"{base}/0", headers=challenge_response(mint(sub="mallory", exp=new + 60)))
        assert response.status_code == 204
        response = await client.post(f"{base}/1", headers=challenge_response(mint(exp=new)))
        assert response.status_code == 204
        await asyncio.sleep(max(0.0, old + 0.5 - time.time()))  # past the old exp: look then
        kafka.produce(topic, "after the old exp")
        for stream in alice:
            assert await stream.read_data("after the old exp") == ["after the old exp"]
        for stream in alice:
            ended = await stream_end(stream)
            assert ended >= new - 0.5
            assert ended - new < END_BOUND


async def test_another_identity_alone_extends_nothing(
    client: httpx.AsyncClient,  # noqa: F811
    kafka: Any,
    route: Any,
    guard: Callable[..., str],  # noqa: F811
) -> None:
    name, topic, path = guard(challenge=1), kafka.topic(), f"/cycle-other/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, guard=name, roles=["read:items"], heartbeat_seconds=3600)
    old = int(time.time()) + 3
    async with contextlib.AsyncExitStack() as stack:
        alice = [
            await stack.enter_async_context(open_stream(client, path, headers=bearer(mint(exp=old)))) for _ in range(3)
        ]
        for stream in alice:
            await stream.started()
        response = await client.post(path, headers=challenge_response(mint(sub="mallory", exp=old + 60)))
        assert response.status_code == 204
        for stream in alice:
            ended = await stream_end(stream)
            assert ended >= old - 0.5  # ended at its own exp, not moved to mallory's
            assert ended - old < END_BOUND
