"""Route.upstream: any http(s) URL with a host, single-label hosts included (SPEC 3)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from streams.models import validate_upstream_url


@pytest.mark.parametrize(
    "url",
    [
        "http://sse-server:8001/events",  # a compose service name, as in Zilla's sse proxy example
        "https://events.example.com/stream?x=1",
        "http://127.0.0.1:8001/events",
        "http://[::1]:8001/",
        "http://localhost/",
    ],
)
def test_accepted(url: str) -> None:
    validate_upstream_url(url)


@pytest.mark.parametrize(
    "url",
    ["ftp://files.example.com/", "http://", "/events", "http://a b/", "http://x:99999/", "http://-x/", "http:///e"],
)
def test_refused(url: str) -> None:
    with pytest.raises(ValidationError):
        validate_upstream_url(url)
