"""Admission at the unit level: the errors a request gets, and log lines that never hold the token."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from guards.policy import policy_compile
from streams.core.errors import InsufficientRoles, InvalidToken, MissingCredentials, StreamError
from streams.core.routes import RouteSpec
from streams.edge.authorization.admission import stream_admit
from tests.support.route_specs import route_spec
from tests.support.tokens import guard_fields, mint


def guarded_route(**guard: Any) -> RouteSpec:
    return route_spec(guard=policy_compile(name="g", **guard_fields(**guard)), roles=("read:items",))


def scope(token: str | None = None) -> dict[str, Any]:
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    return {"type": "http", "path": "/secure", "headers": headers, "client": ("10.1.2.3", 4567)}


async def refusal(token: str | None) -> StreamError:
    with pytest.raises(StreamError) as caught:
        await stream_admit(guarded_route(), scope(token), {})
    return caught.value


async def test_public_route_admits_without_principal() -> None:
    route = guarded_route()
    public = RouteSpec(**{**{f: getattr(route, f) for f in RouteSpec.__slots__}, "guard": None, "roles": ()})
    assert await stream_admit(public, scope(), {}) is None


async def test_principal_for_a_good_token() -> None:
    principal = await stream_admit(guarded_route(), scope(mint(sub="alice")), {})
    assert principal is not None
    assert principal.identity == "alice"


async def test_each_refusal_maps_to_one_error_and_is_logged_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    expired, unprivileged = mint(exp=1, sub="x"), mint(scope="other")
    with caplog.at_level(logging.INFO, logger="sluice.guards"):
        missing = await refusal(None)
        invalid = await refusal(expired)
        forbidden = await refusal(unprivileged)
    assert isinstance(missing, MissingCredentials)
    assert missing.headers == [(b"www-authenticate", b'Bearer realm="g"')]
    assert isinstance(invalid, InvalidToken)
    assert (invalid.status, invalid.reason) == (401, "expired")
    assert invalid.headers == [(b"www-authenticate", b'Bearer realm="g", error="invalid_token"')]
    assert isinstance(forbidden, InsufficientRoles)
    assert forbidden.status == 403
    messages = [record.getMessage() for record in caplog.records]
    assert [m.rsplit("reason=", 1)[1].split()[0] for m in messages] == [
        "no_credentials",
        "expired",
        "insufficient_roles",
    ]
    assert all("route=/secure" in m and "client=10.1.2.3:4567" in m for m in messages)
    for token in (expired, unprivileged):
        assert token not in caplog.text
        assert token not in invalid.body().decode() + forbidden.body().decode()
        assert all(record.exc_info is None for record in caplog.records)
