"""Redis (the channel layer) restarts between a challenge and its response.

The outcome may be either: the new token reaches the streams (their deadline
moves to the new ``exp``), or it cannot (503, and they end cleanly at the old
``exp``). Never a stream that outlives the token it was admitted or extended
with. The test runs a redis-server of its own on a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from streams.edge.authorization.reauthorization import CHALLENGE_CONTENT_TYPE
from streams.server.broker import free_port
from streams.server.processes import process_stop
from tests.conftest import Gateway
from tests.faults.conftest import RESULTS, ScenarioResult
from tests.faults.harness import Verdict
from tests.streams.edge.test_wire import Stream, open_stream
from tests.support.polling import condition_wait
from tests.support.tokens import guard_fields, mint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
]

STREAMS = 10
SLACK = 1.5  # seconds: timer granularity and a loaded machine; far below a token's lifetime


class RedisServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis(port=self.port)
        condition_wait(lambda: self._pong(client), within=10, what="redis-server to answer")
        return self

    @staticmethod
    def _pong(client: Any) -> bool:
        try:
            return bool(client.ping())
        except Exception:
            return False

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            process_stop(self.process, timeout=5)
            self.process = None


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


async def ended_at(stream: Stream, within: float) -> float:
    """Read until the server ends the response; the wall clock then."""
    with contextlib.suppress(StopAsyncIteration, httpx.RemoteProtocolError, httpx.ReadError):
        await stream.read_until(lambda s: False, limit=within)
    return time.time()


@pytest.mark.parametrize("when", ["before the challenge", "between challenge and response"])
async def test_redis_restart_around_a_challenge_never_lets_a_stream_outlive_its_token(
    when: str, gateway_factory: Callable[..., Gateway], kafka: Any, route: Any, own_redis: RedisServer
) -> None:
    from guards.services import guard_upsert

    name = f"g-{uuid.uuid4().hex[:8]}"
    guard_upsert(name=name, **guard_fields(challenge=3))
    topic, path = kafka.topic(), f"/faults/redis/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, guard=name, roles=["read:items"], heartbeat_seconds=1)
    gateway = gateway_factory(REDIS_URL=own_redis.url)
    old = int(time.time()) + 7
    new = old + 6
    statuses: list[int] = []
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(30)) as http,
        contextlib.AsyncExitStack() as stack,
    ):
        streams = [
            await stack.enter_async_context(
                open_stream(http, path, headers={"authorization": f"Bearer {mint(exp=old)}"})
            )
            for _ in range(STREAMS)
        ]
        for stream in streams:
            await stream.started()
        if when == "before the challenge":
            own_redis.kill()
            own_redis.start()
        await asyncio.gather(
            *(s.read_until(lambda s: any(e.type == "challenge" for e in s.events), limit=30) for s in streams)
        )
        if when != "before the challenge":
            own_redis.kill()
            own_redis.start()
        # The client answers the challenge like a browser would: again after retry-after, until its old exp.
        while time.time() < old - 1:
            response = await http.post(
                path, headers={"authorization": f"Bearer {mint(exp=new)}", "content-type": CHALLENGE_CONTENT_TYPE}
            )
            statuses.append(response.status_code)
            if response.status_code == 204:
                break
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "reauthorization_unavailable"
            await asyncio.sleep(float(response.headers.get("retry-after", "1")))
        extended = statuses[-1:] == [204]
        ends = await asyncio.gather(*(ended_at(s, within=new - time.time() + 10) for s in streams))
    deadline = new if extended else old
    late = [end - deadline for end in ends if end > deadline + SLACK]
    early = [old - end for end in ends if end < old - SLACK]
    outcome = "extended to the new exp" if extended else "ended at the old exp"
    RESULTS.append(
        ScenarioResult(
            f"redis restart {when}",
            STREAMS,
            0,
            Verdict(0, 0, 0, 0),
            0.0,
            f"challenge responses {statuses}: {outcome}; last end {max(ends) - deadline:+.2f}s from that exp;"
            f" streams past their exp: {len(late)}",
        )
    )
    assert not late, f"{len(late)} streams outlived their token by up to {max(late):.1f}s"
    assert not early
    if extended:
        # Redis was back: the extension reached every stream of this identity.
        assert min(ends) >= old + SLACK
