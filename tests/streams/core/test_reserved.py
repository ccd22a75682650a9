"""Sluice's own endpoints: which paths they own, which route patterns are refused, which are kept from them."""

from __future__ import annotations

import pytest

from streams.core.patterns import pattern_compile
from streams.core.reserved import RESERVED, ReservedEndpoints
from tests.support.route_specs import route_spec


@pytest.mark.parametrize(
    ("path", "endpoint"),
    [
        ("/healthz", "/healthz"),
        ("/readyz", "/readyz"),
        ("/metrics", "/metrics"),
        ("/asyncapi.json", "/asyncapi.json"),
        ("/favicon.ico", "/favicon.ico"),
        ("/", "/"),
        ("/admin/", "/admin/"),
        ("/admin", "/admin/"),
        ("/admin/streams/route/", "/admin/"),
        ("/api/routes/", "/api/"),
        ("/auth/token", "/auth/"),
        ("/viewer/", "/viewer/"),
        ("/client/sluice@1.2.0/sluice.js", "/client/"),
        ("/client", "/client/"),
        ("/events", None),
        ("/metricsx", None),
        ("/administrator", None),
        ("/healthz/x", None),
    ],
)
def test_endpoint_of_a_request_path(path: str, endpoint: str | None) -> None:
    assert RESERVED.endpoint(path) == endpoint


def test_static_prefix_comes_from_the_static_url() -> None:
    reserved = ReservedEndpoints.with_static("static/")
    assert reserved.endpoint("/static/admin/css/base.css") == "/static/"
    assert ReservedEndpoints.with_static("https://cdn.example.com/static/").endpoint("/static/x") is None


@pytest.mark.parametrize(
    ("pattern", "endpoint"),
    [
        ("/metrics", "/metrics"),
        ("/healthz", "/healthz"),
        ("/admin/{x}", "/admin/"),
        ("/admin/{a}/{b}", "/admin/"),
        ("/api", "/api/"),
        ("/auth/{x}", "/auth/"),
        ("/viewer/*", "/viewer/"),
        ("/client/{file}", "/client/"),
    ],
)
def test_a_literal_first_segment_naming_an_endpoint_is_refused(pattern: str, endpoint: str) -> None:
    assert RESERVED.conflict(pattern_compile(pattern)) == endpoint


@pytest.mark.parametrize("pattern", ["/{topic}", "/*", "/{a}/{b}", "/events/{topic}", "/apis/{x}", "/metrics-live"])
def test_general_and_unrelated_patterns_are_accepted(pattern: str) -> None:
    assert RESERVED.conflict(pattern_compile(pattern)) is None


def test_a_general_pattern_names_the_endpoints_it_never_serves() -> None:
    assert RESERVED.shadowed(pattern_compile("/{topic}")) == (
        "/healthz",
        "/readyz",
        "/metrics",
        "/asyncapi.json",
        "/favicon.ico",
        "/streams",
        "/admin/",
        "/api/",
        "/auth/",
        "/client/",
        "/viewer/",
    )
    assert "/" in RESERVED.shadowed(pattern_compile("/*"))
    assert RESERVED.shadowed(pattern_compile("/events/{topic}")) == ()


def test_reserved_paths_never_reach_a_route() -> None:
    from streams.core.routes import RouteTable

    table = RouteTable((route_spec(path="/{topic}", topic="${params.topic}"),))
    for path in ("/healthz", "/metrics", "/asyncapi.json", "/admin", "/favicon.ico"):
        assert table.match(path) is None, path
    found = table.match("/events")
    assert found is not None
    assert found[1] == {"topic": "events"}
