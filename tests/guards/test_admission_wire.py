"""Guarded routes end to end: a real gateway (``runstreams``) admits, refuses and filters by token (SPEC 4.2)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from streams.edge.authorization.reauthorization import CHALLENGE_CONTENT_TYPE
from tests.streams.edge.test_wire import WAIT, Stream, open_stream
from tests.streams.server.test_workers import children_of
from tests.support.polling import condition_wait
from tests.support.tokens import ec_key, guard_fields, mint, mint_hs256, mint_unsigned, rsa_key

pytestmark = pytest.mark.services


@pytest.fixture
async def client(gateway: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


@pytest.fixture
def guard(stream_db: None) -> Callable[..., str]:
    """Factory: a guard trusting the test keys, through the services layer; returns its (unique) name."""
    from guards.services import guard_upsert

    def make(**overrides: Any) -> str:
        name = f"g-{uuid.uuid4().hex[:8]}"
        guard_upsert(name=name, **guard_fields(**overrides))
        return name

    return make


@pytest.fixture
def secure(kafka: Any, route: Any, guard: Callable[..., str]) -> tuple[str, str, str]:
    """A guarded route requiring read:items on a fresh topic: (path, topic, guard name)."""
    topic = kafka.topic()
    name = guard(query_param="access_token", cookie_name="jwt")
    path = f"/secure/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, guard=name, roles=["read:items"], initial="earliest", heartbeat_seconds=3600)
    return path, topic, name


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_no_credentials_is_401_with_the_realm(client: httpx.AsyncClient, secure: tuple[str, str, str]) -> None:
    path, _, name = secure
    response = await client.get(path)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == f'Bearer realm="{name}"'
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == "unauthorized"


def _now() -> int:
    return int(time.time())


TOKEN_CASES: list[tuple[str, Callable[[], str]]] = [
    ("bad_signature", lambda: mint_hs256("not-the-guard-secret-but-32-bytes-long!")),
    ("wrong_issuer", lambda: mint(iss="https://evil.test")),
    ("wrong_audience", lambda: mint(aud="someone-else")),
    ("expired", lambda: mint(exp=_now() - 60)),
    ("not_yet_valid", lambda: mint(nbf=_now() + 600)),
    ("unknown_kid", lambda: mint(kid="rotated-away")),
    ("alg_mismatch", lambda: mint(ec_key(), kid=rsa_key().kid)),
    ("alg_mismatch", lambda: mint_hs256(rsa_key().public_pem(), kid=rsa_key().kid)),
    ("alg_not_allowed", lambda: mint_unsigned()),
    ("malformed_token", lambda: "not-a-token"),
]


@pytest.mark.parametrize(("reason", "token"), TOKEN_CASES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(TOKEN_CASES)])
async def test_refused_token_is_401_invalid_token_with_the_reason(
    client: httpx.AsyncClient, secure: tuple[str, str, str], reason: str, token: Callable[[], str]
) -> None:
    path, _, name = secure
    response = await client.get(path, headers=bearer(token()))
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == f'Bearer realm="{name}", error="invalid_token"'
    body = response.json()
    assert (body["error"], body["status"], body["reason"]) == ("invalid_token", 401, reason)


async def test_missing_role_is_403(client: httpx.AsyncClient, secure: tuple[str, str, str]) -> None:
    path, _, name = secure
    response = await client.get(path, headers=bearer(mint(scope="write:items")))
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == f'Bearer realm="{name}", error="insufficient_scope"'
    body = response.json()
    assert (body["error"], body["reason"]) == ("forbidden", "insufficient_roles")
    assert "read:items" in body["detail"]


@pytest.mark.parametrize("carrier", ["header", "query", "cookie"])
async def test_valid_token_with_the_role_streams(
    client: httpx.AsyncClient, kafka: Any, secure: tuple[str, str, str], carrier: str
) -> None:
    path, topic, _ = secure
    kafka.produce(topic, "hello", key="k")
    token = mint(scope="read:items")
    request: dict[str, Any] = {
        "header": {"headers": bearer(token)},
        "query": {"params": {"access_token": token}},
        "cookie": {"headers": {"cookie": f"other=1; jwt={token}"}},
    }[carrier]
    async with open_stream(client, path, **request) as stream:
        assert await stream.read_data("hello") == ["hello"]


async def test_cookie_is_tried_before_header_and_header_before_query(
    client: httpx.AsyncClient, secure: tuple[str, str, str]
) -> None:
    path, _, _ = secure
    good, bad = mint(), mint(exp=_now() - 60)
    assert (await client.head(path, headers={"cookie": f"jwt={good}", **bearer(bad)})).status_code == 200
    response = await client.get(path, headers={"cookie": f"jwt={bad}", **bearer(good)})
    assert (response.status_code, response.json()["reason"]) == (401, "expired")
    response = await client.get(path, headers=bearer(bad), params={"access_token": good})
    assert (response.status_code, response.json()["reason"]) == (401, "expired")


async def test_each_user_gets_only_their_own_messages(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    topic = kafka.topic(partitions=2)
    path = f"/mine/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, guard=guard(), filters=[{"key": "${identity}"}], initial="earliest")
    for key, value in [("alice", "a1"), ("bob", "b1"), ("alice", "a2"), ("carol", "c1"), ("bob", "b2")]:
        kafka.produce(topic, value, key=key)
    async with open_stream(client, path, headers=bearer(mint(sub="alice"))) as alice:
        assert await alice.read_data("a2") == ["a1", "a2"]
        kafka.produce(topic, "b3", key="bob")
        kafka.produce(topic, "a3", key="alice")
        async with open_stream(client, path, headers=bearer(mint(sub="bob"))) as bob:
            assert sorted(await bob.read_data("b3")) == ["b1", "b2", "b3"]
        assert await alice.read_data("a3") == ["a1", "a2", "a3"]


async def test_topic_from_a_token_attribute(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    topic = kafka.topic()
    tenant = topic.split("-", 1)[1]
    path = f"/tenant/{uuid.uuid4().hex[:8]}"
    route(path=path, topic="t-${attributes.tenant}", guard=guard(attributes={"tenant": "org.id"}), initial="earliest")
    kafka.produce(topic, "for the tenant")
    async with open_stream(client, path, headers=bearer(mint(org={"id": tenant}))) as stream:
        assert await stream.read_data("for the tenant") == ["for the tenant"]


async def test_public_route_still_streams_without_credentials(
    client: httpx.AsyncClient, kafka: Any, route: Any
) -> None:
    topic = kafka.topic()
    route(path=f"/open/{topic}", topic=topic, initial="earliest")
    kafka.produce(topic, "public")
    async with open_stream(client, f"/open/{topic}") as stream:
        assert await stream.read_data("public") == ["public"]


async def test_refusals_are_logged_without_the_token(
    client: httpx.AsyncClient, gateway: Any, secure: tuple[str, str, str]
) -> None:
    path, _, _ = secure
    tokens = {
        "expired": mint(exp=_now() - 60, sub="log-test-expired"),
        "bad_signature": mint_hs256("not-the-guard-secret-but-32-bytes-long!", sub="log-test-sig"),
        "insufficient_roles": mint(scope="nothing", sub="log-test-roles"),
    }
    await client.get(path, headers=bearer(tokens["expired"]))
    await client.get(path, params={"access_token": tokens["bad_signature"]})
    await client.get(path, headers={"cookie": f"jwt={tokens['insufficient_roles']}"})
    await client.get(path)

    def refusals() -> list[str]:
        return [line for line in gateway.output if "refused" in line and f"route={path}" in line]

    lines = condition_wait(lambda: len(refusals()) >= 4 and refusals(), within=WAIT, what="four refusals logged")
    output = "".join(gateway.output)
    for reason in [*tokens, "no_credentials"]:
        assert any(f"reason={reason}" in line and "client=127.0.0.1:" in line for line in lines), (reason, lines)
    for token in tokens.values():
        assert token not in output
        assert token.split(".")[2] not in output  # not even the signature part
    assert all("sluice.guards" in line for line in lines)


class JwksServer:
    """A tiny identity provider on loopback serving a JWKS document the test can change."""

    def __init__(self) -> None:
        self.document: dict[str, Any] = {"keys": [rsa_key().jwk()]}
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def idp() -> Iterator[JwksServer]:
    server = JwksServer()
    yield server
    server.close()


async def test_keys_from_the_jwks_url(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str], idp: JwksServer
) -> None:
    path = f"/jwks/{uuid.uuid4().hex[:8]}"
    route(
        path=path, topic=kafka.topic(), guard=guard(keys=[], jwks_url=idp.url, algorithms=["RS256", "ES256"], secret="")
    )
    assert (await client.head(path, headers=bearer(mint()))).status_code == 200
    response = await client.get(path, headers=bearer(mint(kid="not-published")))
    assert (response.status_code, response.json()["reason"]) == (401, "unknown_kid")
    response = await client.get(path, headers=bearer(mint(ec_key(), kid="rsa-1")))
    assert (response.status_code, response.json()["reason"]) == (401, "alg_mismatch")
    assert idp.requests == 1  # the unknown kid came within the refresh interval: no second fetch


async def test_jwks_url_that_never_answered_is_503(
    client: httpx.AsyncClient, route: Any, guard: Callable[..., str]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    path = f"/jwks-down/{uuid.uuid4().hex[:8]}"
    url = f"http://127.0.0.1:{closed_port}/jwks"
    route(path=path, topic="unused", guard=guard(keys=[], jwks_url=url, algorithms=["RS256"], secret=""))
    response = await client.get(path, headers=bearer(mint()))
    assert response.status_code == 503
    assert response.headers["retry-after"] == "5"
    assert response.json()["error"] == "keys_unavailable"


async def test_stream_ends_when_its_token_expires(
    client: httpx.AsyncClient, kafka: Any, secure: tuple[str, str, str]
) -> None:
    path, topic, _ = secure
    expires = _now() + 3
    kafka.produce(topic, "before", key="k")
    async with open_stream(client, path, headers=bearer(mint(scope="read:items", exp=expires))) as stream:
        assert await stream.read_data("before") == ["before"]
        with pytest.raises(StopAsyncIteration):  # the server ends the response
            await stream.read_until(lambda s: False)
        assert time.time() >= expires
    assert stream.data == ["before"]


# -- continuous authorization (SPEC 4.3) ------------------------------------------------


def challenge_response(token: str) -> dict[str, str]:
    return {**bearer(token), "content-type": CHALLENGE_CONTENT_TYPE}


async def stream_end(stream: Stream) -> float:
    """Read until the server ends the response; the wall clock then."""
    with pytest.raises(StopAsyncIteration):
        await stream.read_until(lambda s: False)
    return time.time()


async def test_challenge_comes_at_exp_minus_challenge_then_the_stream_ends(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    path = f"/challenge/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=kafka.topic(), guard=guard(challenge=2), roles=["read:items"], heartbeat_seconds=3600)
    expires = _now() + 2 + 2
    async with open_stream(client, path, headers=bearer(mint(exp=expires))) as stream:
        start = await stream.started()
        await stream.read_until(lambda s: any(e.type == "challenge" for e in s.events))
        assert time.time() >= expires - 2 - 0.5  # the timer's clock and the wall clock may differ a little
        (challenge,) = [e for e in stream.events if e.type == "challenge"]
        assert challenge.data == '{"method":"POST","headers":{"content-type":"application/x-challenge-response"}}'
        assert challenge.id == start  # no id line: lastEventId untouched
        frame = (
            b"event: challenge\n"
            b'data: {"method":"POST","headers":{"content-type":"application/x-challenge-response"}}\n'
            b"\n"
        )
        assert stream.raw.endswith(b"\n\n" + frame)
        assert await stream_end(stream) >= expires
    assert stream.raw.count(b"event: challenge") == 1


async def test_no_challenge_when_the_guard_has_none(
    client: httpx.AsyncClient, kafka: Any, secure: tuple[str, str, str]
) -> None:
    path, _, _ = secure
    expires = _now() + 2
    async with open_stream(client, path, headers=bearer(mint(exp=expires))) as stream:
        assert await stream_end(stream) >= expires
    assert b"challenge" not in stream.raw


async def test_challenge_response_moves_the_deadline_of_every_stream_it_grants(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    name, topic, base = guard(challenge=1), kafka.topic(), f"/reauth/{uuid.uuid4().hex[:8]}"
    route(path=f"{base}/read", topic=topic, guard=name, roles=["read:items"], heartbeat_seconds=3600)
    route(path=f"{base}/admin", topic=topic, guard=name, roles=["admin"], heartbeat_seconds=3600)
    old = _now() + 5
    new = old + 3
    async with (
        open_stream(client, f"{base}/read", headers=bearer(mint(exp=old))) as first,
        open_stream(client, f"{base}/read", headers=bearer(mint(exp=old))) as second,
        open_stream(client, f"{base}/admin", headers=bearer(mint(scope="read:items admin", exp=old))) as admin,
        open_stream(client, f"{base}/read", headers=bearer(mint(sub="bob", exp=old))) as bob,
    ):
        for stream in (first, second, admin, bob):
            await stream.started()
        response = await client.post(f"{base}/read", headers=challenge_response(mint(exp=new)))
        assert (response.status_code, response.content) == (204, b"")
        # The new token does not grant admin, and bob's streams are bob's: both end at the old exp.
        assert await stream_end(admin) >= old
        assert await stream_end(bob) >= old
        kafka.produce(topic, "after the old exp")
        for stream in (first, second):
            await stream.read_data("after the old exp")
            assert await stream_end(stream) >= new
    for stream, expected in [(first, ["after the old exp"]), (second, ["after the old exp"]), (admin, []), (bob, [])]:
        assert [e.data for e in stream.messages if e.type == "message"] == expected


async def test_challenge_response_with_a_bad_token_is_401_and_moves_nothing(
    client: httpx.AsyncClient, gateway: Any, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    path = f"/reauth-bad/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=kafka.topic(), guard=guard(challenge=1), roles=["read:items"], heartbeat_seconds=3600)
    old = _now() + 4
    async with open_stream(client, path, headers=bearer(mint(exp=old))) as stream:
        await stream.started()
        bad = mint_hs256("not-the-guard-secret-but-32-bytes-long!", exp=old + 60)
        response = await client.post(path, headers=challenge_response(bad))
        assert response.status_code == 401
        assert (response.json()["error"], response.json()["reason"]) == ("invalid_token", "bad_signature")
        response = await client.post(path, headers=challenge_response(mint(scope="write:items", exp=old + 60)))
        assert (response.status_code, response.json()["reason"]) == (403, "insufficient_roles")
        response = await client.post(path, headers={"content-type": CHALLENGE_CONTENT_TYPE})
        assert (response.status_code, response.json()["error"]) == (401, "unauthorized")
        assert await stream_end(stream) >= old
    assert bad not in "".join(gateway.output)


async def test_other_posts_are_405(
    client: httpx.AsyncClient, kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    guarded, public = f"/post-guarded/{uuid.uuid4().hex[:8]}", f"/post-public/{uuid.uuid4().hex[:8]}"
    route(path=guarded, topic=kafka.topic(), guard=guard(challenge=1), roles=["read:items"])
    route(path=public, topic=kafka.topic())
    response = await client.post(guarded, headers={**bearer(mint()), "content-type": "application/json"}, content=b"{}")
    assert (response.status_code, response.headers["allow"]) == (405, "GET, HEAD, POST")
    assert response.json()["error"] == "method_not_allowed"
    response = await client.post(public, headers=challenge_response(mint()))
    assert (response.status_code, response.headers["allow"]) == (405, "GET, HEAD")


def connections_by_process(pids: set[int], port: int) -> dict[int, int]:
    """Established connections to ``port`` held open by each of ``pids`` (Linux /proc)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                    inodes.add(fields[9])
    counts = {}
    for pid in pids:
        held = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                held += 1
        counts[pid] = held
    return counts


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="streams on other worker processes hear a challenge response through a shared channel layer: "
    "set REDIS_URL (the in-memory layer reaches only its own process)",
)
async def test_challenge_response_reaches_streams_on_every_worker(
    gateway_factory: Callable[..., Any], kafka: Any, route: Any, guard: Callable[..., str]
) -> None:
    gateway = gateway_factory("--workers", "2")
    assert gateway.process is not None
    supervisor = gateway.process.pid
    workers = condition_wait(
        lambda: len(children_of(supervisor)) == 2 and children_of(supervisor), within=20.0, what="two workers"
    )
    topic, path = kafka.topic(), f"/reauth-workers/{uuid.uuid4().hex[:8]}"
    route(path=path, topic=topic, guard=guard(challenge=1), roles=["read:items"], heartbeat_seconds=3600)
    old = _now() + 12
    new = old + 3
    token = mint(exp=old)
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http,
        contextlib.AsyncExitStack() as streams,
    ):
        bob = await streams.enter_async_context(open_stream(http, path, headers=bearer(mint(sub="bob", exp=old))))
        alice: list[Stream] = []
        # The kernel hands each new connection to one worker; open streams until both hold some.
        while len(alice) < 6 or min(connections_by_process(workers, gateway.port).values()) < 2:
            assert len(alice) < 40, connections_by_process(workers, gateway.port)
            stream = await streams.enter_async_context(open_stream(http, path, headers=bearer(token)))
            await stream.started()
            alice.append(stream)
        assert time.time() < old, "streams took until the old exp to open; nothing left to extend"
        response = await http.post(path, headers=challenge_response(mint(exp=new)))
        assert response.status_code == 204
        assert await stream_end(bob) >= old
        kafka.produce(topic, "after the old exp")
        for stream in alice:
            await stream.read_data("after the old exp")
        for stream in alice:
            assert await stream_end(stream) >= new
            assert [e.data for e in stream.messages if e.type == "message"] == ["after the old exp"]
