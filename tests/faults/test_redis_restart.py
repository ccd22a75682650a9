"""Redis (the channel layer) restarts empty while gateways serve.

Around a challenge, the outcome may be either: the new token reaches the streams
(204: their deadline moves to the new ``exp``), or it cannot be confirmed (503:
each stream ends cleanly at the old ``exp``, or at the new one where it did
arrive). Never a stream that outlives the token it was admitted or extended
with. With three gateways: each joins its groups again, ``/readyz`` says 503
while Redis is away and 200 once joined, a challenge answered on one extends a
stream on another, and a revocation made while Redis was away ends the open
streams everywhere within a second of Redis being back. And with Redis up, a
gateway logs no channel-layer warning. The tests run a redis-server of their own
on a free port, restarted without persistence.
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
    """Read until the server ends the response, or for ``within`` seconds; the wall clock then."""
    with contextlib.suppress(StopAsyncIteration, httpx.RemoteProtocolError, httpx.ReadError, TimeoutError):
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
    # A 503 says the new token may not have reached every stream: those it reached end at the new exp
    # (a valid token), the others at the old one. Never later than the token a stream holds.
    deadline = new if extended else old
    late = [end - new for end in ends if end > new + SLACK]
    astray = [end for end in ends if abs(end - old) > SLACK and abs(end - new) > SLACK]
    early = [old - end for end in ends if end < old - SLACK]
    outcome = "extended to the new exp" if extended else "503: each stream ended at the old or the new exp"
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
    assert not astray, f"{len(astray)} streams ended at neither exp"
    assert not early
    if extended:
        # Redis was back: the extension reached every stream of this identity.
        assert min(ends) >= old + SLACK


def layer_warnings(gateway: Gateway) -> list[str]:
    return [line for line in gateway.output if "WARNING" in line and "channel layer" in line]


async def test_no_channel_layer_warning_while_redis_is_up(
    gateway_factory: Callable[..., Gateway], kafka: Any, route: Any, own_redis: RedisServer
) -> None:
    """Four times the period at which idle receives used to time out (every 6 s, from each listener)."""
    from guards.services import guard_upsert

    name = f"g-{uuid.uuid4().hex[:8]}"
    guard_upsert(name=name, **guard_fields(challenge=0))
    path = f"/faults/redis/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=kafka.topic(), guard=name, roles=["read:items"], heartbeat_seconds=1)
    gateway = gateway_factory(REDIS_URL=own_redis.url)
    # Both groups joined: the configuration group (any request), a guarded stream's group.
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(40)) as http,
        open_stream(http, path, headers={"authorization": f"Bearer {mint()}"}) as stream,
    ):
        await stream.started()
        assert (await http.get("/readyz")).status_code == 200
        await asyncio.sleep(24)
        assert (await http.get("/readyz")).status_code == 200
    assert not layer_warnings(gateway), layer_warnings(gateway)


async def readyz(http: httpx.AsyncClient) -> tuple[int, dict[str, Any]]:
    try:
        response = await http.get("/readyz", timeout=5)
    except httpx.HTTPError as exc:
        return 0, {"error": str(exc)}
    return response.status_code, response.json()


async def readyz_wait(clients: list[httpx.AsyncClient], status: int, within: float) -> float:
    """Poll every gateway's /readyz until each says ``status``; when the last did (bounded)."""
    deadline = time.monotonic() + within
    pending = list(clients)
    while pending:
        answers = await asyncio.gather(*(readyz(http) for http in pending))
        for http, (code, body) in zip(list(pending), answers, strict=True):
            if code == status:
                if status == 503:
                    assert body["checks"]["channel_layer"]["status"] == "down", body
                pending.remove(http)
            elif status == 200:
                # Not ready yet: only because the channel layer is not (never another dependency).
                assert body["checks"]["channel_layer"]["status"] == "down", body
        assert time.monotonic() < deadline, f"{len(pending)} gateway(s) never answered /readyz {status}"
        await asyncio.sleep(0.1)
    return time.time()


async def test_three_gateways_rejoin_after_redis_restarts_empty(
    gateway_factory: Callable[..., Gateway], kafka: Any, route: Any, own_redis: RedisServer
) -> None:
    from guards.services import guard_upsert

    name = f"g-{uuid.uuid4().hex[:8]}"
    guard_upsert(name=name, **guard_fields(challenge=0))
    topic, base = kafka.topic(), f"/faults/redis/{uuid.uuid4().hex[:8]}"
    challenged, revoked = f"{base}/challenged", f"{base}/revoked"
    route(path=challenged, topic=topic, guard=name, roles=["read:items"], heartbeat_seconds=1)
    route(path=revoked, topic=topic, guard=name, roles=["read:items"], heartbeat_seconds=1)
    gateways = [gateway_factory(REDIS_URL=own_redis.url) for _ in range(3)]
    old = int(time.time()) + 25
    new = old + 30
    async with contextlib.AsyncExitStack() as stack:
        https = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=g.url, timeout=httpx.Timeout(60)))
            for g in gateways
        ]
        a, b = https[0], https[1]
        # On B, a stream to extend (its token ends at ``old``); on every gateway, a stream to revoke.
        extended = await stack.enter_async_context(
            open_stream(b, challenged, headers={"authorization": f"Bearer {mint(exp=old)}"})
        )
        doomed = [
            await stack.enter_async_context(open_stream(http, revoked, headers={"authorization": f"Bearer {mint()}"}))
            for http in https
        ]
        for stream in (extended, *doomed):
            await stream.started()
        ends = [asyncio.ensure_future(ended_at(stream, within=90)) for stream in doomed]
        await readyz_wait(https, 200, within=10)

        own_redis.kill()
        killed = time.time()
        down_seen = await readyz_wait(https, 503, within=5)
        # Revoked while the layer is away: the message cannot be sent, the database has the change.
        route(path=revoked, topic=topic, guard=name, roles=["admin:items"], heartbeat_seconds=1)
        own_redis.start()
        back = time.time()
        ready_again = await readyz_wait(https, 200, within=10)

        ended = await asyncio.wait_for(asyncio.gather(*ends), 15)
        late = [end - back for end in ended]
        # A challenge answered on A, retried after retry-after as the browser client does.
        statuses: list[int] = []
        while time.time() < old - 2:
            response = await a.post(
                challenged,
                headers={"authorization": f"Bearer {mint(exp=new)}", "content-type": CHALLENGE_CONTENT_TYPE},
            )
            statuses.append(response.status_code)
            if response.status_code == 204:
                break
            assert response.status_code == 503, response.text
            assert response.json()["error"] == "reauthorization_unavailable"
            await asyncio.sleep(float(response.headers.get("retry-after", "1")))
        assert statuses[-1:] == [204], statuses
        # B's stream outlives its old token: it is still open well after ``old``.
        extended_end = await ended_at(extended, within=old + 3 - time.time())
    RESULTS.append(
        ScenarioResult(
            "redis restarted empty under 3 gateways",
            4,
            0,
            Verdict(0, 0, 0, 0),
            max(late),
            f"/readyz 503 on all {down_seen - killed:.2f}s after the kill, 200 again {ready_again - back:.2f}s after"
            f" redis was back;"
            f" revocation ended streams {min(late):+.2f}..{max(late):+.2f}s from redis back;"
            f" challenge on A {statuses}, stream on B open past its old exp",
        )
    )
    assert max(late) < 1.0, f"revocation reached the streams {max(late):.2f}s after redis was back"
    assert extended_end >= old + 2.5, "the stream on B ended at its old exp: the answer on A never reached it"
    for gateway in gateways:
        assert not [line for line in gateway.output if "Traceback" in line], gateway.output[-20:]
