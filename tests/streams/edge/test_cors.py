"""CORS per route: preflights for the stream GET and the challenge-response POST, headers on every answer,
refusals of origins a route does not allow (JSON naming both, logged once per route and origin, counted)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from streams.edge.http.cors import cors_headers, origin_allowed
from tests.conftest import Gateway, Kafka, UpstreamServer
from tests.guards.test_admission_wire import bearer, challenge_response, guard  # noqa: F401 (fixture)
from tests.streams.edge.test_mux_wire import members
from tests.streams.edge.test_wire import QUIET, WAIT, open_stream
from tests.support.tokens import mint

pytestmark = pytest.mark.services

APP = "https://app.example.com"
EVIL = "https://evil.example.com"


@pytest.fixture
async def client(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        yield http


@pytest.fixture
def kafka_route(kafka: Kafka, route: Any) -> Callable[..., str]:
    def make(**fields: Any) -> str:
        path = f"/cors/{uuid.uuid4().hex[:8]}"
        route(path=path, topic=kafka.topic(), heartbeat_seconds=QUIET, **fields)
        return path

    return make


def preflight(origin: str, method: str = "GET", headers: str = "last-event-id") -> dict[str, str]:
    return {"origin": origin, "access-control-request-method": method, "access-control-request-headers": headers}


def cors_of(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


def test_origin_matching() -> None:
    assert origin_allowed("https://a.test", ["https://a.test/"])
    assert not origin_allowed("https://a.test.evil", ["https://a.test"])
    assert origin_allowed("null", ["*"])
    scope = {"headers": [(b"origin", b"https://a.test")]}
    assert cors_headers(scope, ["*"], False) == [
        (b"access-control-allow-origin", b"*"),
        (b"access-control-expose-headers", b"www-authenticate, retry-after, allow, content-type"),
    ]
    assert cors_headers({"headers": []}, ["*"], False) == []


async def test_preflight_for_the_stream_get(client: httpx.AsyncClient, kafka_route: Callable[..., str]) -> None:
    path = kafka_route(allow_origins=[APP])
    response = await client.options(path, headers=preflight(APP))
    assert response.status_code == 204
    assert cors_of(response) == {
        "access-control-allow-origin": APP,
        "access-control-allow-methods": "GET, HEAD",
        "access-control-allow-headers": "authorization, content-type, last-event-id, cache-control",
        "access-control-max-age": "600",
        "access-control-expose-headers": "www-authenticate, retry-after, allow, content-type",
    }
    assert response.headers["vary"] == "origin"


async def test_preflight_from_an_origin_not_allowed_is_403_without_cors_headers(
    client: httpx.AsyncClient, kafka_route: Callable[..., str]
) -> None:
    for path in (kafka_route(allow_origins=[APP]), kafka_route()):
        response = await client.options(path, headers=preflight(EVIL))
        assert response.status_code == 403
        assert response.json() == {
            "error": "origin_not_allowed",
            "status": 403,
            "detail": f"origin {EVIL} is not allowed on route {path}: add it to the route's allow_origins "
            "(or to SLUICE_CORS_ALLOW_ORIGINS, which routes without allow_origins inherit)",
            "origin": EVIL,
            "route": path,
        }
        assert cors_of(response) == {}


async def test_preflight_for_post_on_a_public_route_is_403(
    client: httpx.AsyncClient, kafka_route: Callable[..., str]
) -> None:
    path = kafka_route(allow_origins=[APP])
    response = await client.options(path, headers=preflight(APP, "POST", "content-type"))
    assert response.status_code == 403
    assert "POST" in response.json()["detail"]


async def test_stream_answers_carry_cors_headers_only_for_allowed_origins(
    client: httpx.AsyncClient, kafka_route: Callable[..., str]
) -> None:
    path = kafka_route(allow_origins=[APP])
    async with open_stream(client, path, headers={"origin": APP}) as stream:
        assert stream.response.headers["access-control-allow-origin"] == APP
        assert "access-control-allow-credentials" not in stream.response.headers
    wildcard = kafka_route(allow_origins=["*"])
    async with open_stream(client, wildcard, headers={"origin": EVIL}) as stream:
        assert stream.response.headers["access-control-allow-origin"] == "*"
    refused = await client.get(path, headers={"origin": APP, "last-event-id": "not-an-id"})
    assert refused.status_code == 400
    assert refused.headers["access-control-allow-origin"] == APP  # a script can read why


async def test_guarded_route_with_credentials_preflight_and_challenge_response(
    client: httpx.AsyncClient,
    kafka_route: Callable[..., str],
    guard: Callable[..., str],  # noqa: F811 (the fixture imported above)
) -> None:
    path = kafka_route(
        allow_origins=[APP], allow_credentials=True, guard=guard(challenge=1, cookie_name="jwt"), roles=["read:items"]
    )
    response = await client.options(path, headers=preflight(APP, "POST", "content-type, authorization"))
    assert response.status_code == 204
    assert response.headers["access-control-allow-methods"] == "GET, HEAD, POST"
    assert response.headers["access-control-allow-credentials"] == "true"
    answer = await client.post(path, headers={"origin": APP, **challenge_response(mint())})
    assert answer.status_code == 204
    assert (answer.headers["access-control-allow-origin"], answer.headers["access-control-allow-credentials"]) == (
        APP,
        "true",
    )
    unauthorized = await client.get(path, headers={"origin": APP})
    assert unauthorized.status_code == 401
    assert "www-authenticate" in unauthorized.headers["access-control-expose-headers"]
    async with open_stream(client, path, headers={"origin": APP, "cookie": f"jwt={mint()}"}) as stream:
        assert stream.response.headers["access-control-allow-credentials"] == "true"
    assert (await client.head(path, headers=bearer(mint()))).status_code == 200


async def test_proxy_route_cors(client: httpx.AsyncClient, route: Any, upstream_sse: UpstreamServer) -> None:
    path = f"/cors-proxy/{uuid.uuid4().hex[:8]}"
    route(path=path, kind="sse-proxy", upstream=f"{upstream_sse.url}/events", topic="", allow_origins=[APP])
    assert (await client.options(path, headers=preflight(APP))).status_code == 204
    async with open_stream(client, path, headers={"origin": APP}) as stream:
        assert stream.response.headers["access-control-allow-origin"] == APP


async def test_a_stream_from_an_origin_not_allowed_is_refused_with_json_the_page_can_read(
    client: httpx.AsyncClient, gateway: Gateway, kafka_route: Callable[..., str]
) -> None:
    path = kafka_route(allow_origins=[APP])
    for method in ("GET", "HEAD"):
        refused = await client.request(method, path, headers={"origin": EVIL, "last-event-id": "not-an-id"})
        assert refused.status_code == 403
        assert refused.headers["content-type"] == "application/json"
        assert (refused.headers["access-control-allow-origin"], refused.headers["vary"]) == (EVIL, "origin")
        assert "access-control-allow-credentials" not in refused.headers
    body = (await client.get(path, headers={"origin": EVIL})).json()
    assert (body["error"], body["origin"], body["route"]) == ("origin_not_allowed", EVIL, path)
    assert f"origin {EVIL} is not allowed on route {path}" in body["detail"]
    # No Origin (a server-side client) and the gateway's own pages are not refused for it.
    async with open_stream(client, path):
        pass
    async with open_stream(client, path, headers={"origin": gateway.url}) as stream:
        assert cors_of(stream.response) == {}
    named = f"localhost:{gateway.port}"
    async with open_stream(client, path, headers={"origin": f"http://{named}", "host": named}):
        pass  # the page's own host, whatever name it was reached by


async def test_a_multiplexed_stream_names_the_member_whose_route_refuses_the_origin(
    client: httpx.AsyncClient, kafka_route: Callable[..., str]
) -> None:
    open_to_app, closed = kafka_route(allow_origins=[APP, EVIL]), kafka_route(allow_origins=[APP])
    query = members(f"a:{open_to_app}", f"b:{closed}")
    refused = await client.get("/streams", params=query, headers={"origin": EVIL})
    assert refused.status_code == 403
    body = refused.json()
    assert (body["member"], body["origin"], body["route"]) == ("b", EVIL, closed)
    assert body["detail"].startswith(f"member b ({closed}): origin {EVIL} is not allowed on route {closed}")
    preflighted = await client.options("/streams", params=query, headers=preflight(EVIL))
    assert (preflighted.status_code, preflighted.json()["member"]) == (403, "b")
    async with open_stream(client, "/streams", params=query, headers={"origin": APP}) as stream:
        assert stream.response.headers["access-control-allow-origin"] == APP


def refusal_lines(gateway: Gateway, path: str) -> list[dict[str, object]]:
    found = []
    for line in list(gateway.output):
        if '"event":"origin_refused"' in line and f'"route":"{path}"' in line:
            found.append(json.loads(line[line.index("{") :]))
    return found


async def test_refusals_are_logged_once_per_route_and_origin_and_counted(
    client: httpx.AsyncClient, gateway: Gateway, kafka_route: Callable[..., str]
) -> None:
    path = kafka_route(allow_origins=[APP])
    kafka_route(allow_origins=[EVIL])
    made_up = f"https://{uuid.uuid4().hex[:8]}.example.net"
    for _ in range(3):
        assert (await client.get(path, params={"access_token": "secret"}, headers={"origin": EVIL})).status_code == 403
    assert (await client.options(path, headers=preflight(EVIL))).status_code == 403
    assert (await client.get(path, headers={"origin": made_up})).status_code == 403
    await asyncio.sleep(0.5)
    lines = refusal_lines(gateway, path)
    assert sorted(str(line["origin"]) for line in lines) == sorted([EVIL, made_up])
    line = next(line for line in lines if line["origin"] == EVIL)
    assert (line["path"], line["method"], line["status"], line["preflight"]) == (path, "GET", 403, False)
    assert "secret" not in "".join(gateway.output)
    metrics = (await client.get("/metrics")).text
    # EVIL is named by a route (a configured origin); a made-up one is "other".
    assert f'sluice_origin_refusals_total{{origin="other",preflight="false",route="{path}"}} 1.0' in metrics
    assert f'sluice_origin_refusals_total{{origin="{EVIL}",preflight="false",route="{path}"}} 3.0' in metrics
    assert f'sluice_origin_refusals_total{{origin="{EVIL}",preflight="true",route="{path}"}} 1.0' in metrics


async def test_routes_without_origins_inherit_the_project_default(
    gateway_factory: Callable[..., Gateway], kafka_route: Callable[..., str]
) -> None:
    own = gateway_factory(SLUICE_CORS_ALLOW_ORIGINS=f"{APP}, http://localhost:3000")
    inheriting, overriding = kafka_route(), kafka_route(allow_origins=[EVIL])
    async with httpx.AsyncClient(base_url=own.url, timeout=httpx.Timeout(WAIT)) as http:
        async with open_stream(http, inheriting, headers={"origin": APP}) as stream:
            assert stream.response.headers["access-control-allow-origin"] == APP
        assert (await http.options(inheriting, headers=preflight("http://localhost:3000"))).status_code == 204
        assert (await http.get(inheriting, headers={"origin": EVIL})).status_code == 403
        assert (await http.get(overriding, headers={"origin": APP})).json()["route"] == overriding
        async with open_stream(http, overriding, headers={"origin": EVIL}):
            pass
