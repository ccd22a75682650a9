"""``runstreams --demo`` end to end: its routes, live data on the page's stream, and the guarded route."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.streams.test_wire import WAIT, open_stream

pytestmark = pytest.mark.slow


async def test_demo_serves_live_scores_and_guards_its_secure_route(
    gateway_factory: Callable[..., Any], tmp_path: Path
) -> None:
    key_file = tmp_path / "issuer.pem"
    gateway = gateway_factory("--demo", SLUICE_DEV_ISSUER="1", SLUICE_DEV_ISSUER_KEY_FILE=str(key_file))
    assert key_file.exists()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        page = await http.get("/", headers={"accept": "text/html"})
        assert page.status_code == 200
        for path in ("/demo/scores", "/demo/leagues/{league}", "/demo/secure/leagues/{league}"):
            assert f'data-path="{path}"' in page.text
        async with open_stream(http, "/demo/leagues/premier") as stream:
            (first, *_) = await stream.read_messages(1)
        score = json.loads(first.data)
        assert score["league"] == "premier"
        assert {"match", "home", "away", "score", "minute"} <= set(score)
        refused = await http.get("/demo/secure/leagues/premier")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="demo"'
