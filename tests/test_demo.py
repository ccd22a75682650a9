"""``runstreams --demo`` end to end: its routes, live data on the page's stream, and the guarded route."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.streams.edge.test_wire import WAIT, open_stream

pytestmark = pytest.mark.slow

SPARK_WAIT = 300.0  # Spark starts in a child process of the demo: a JVM, a session, a first batch


async def test_demo_serves_live_scores_and_guards_its_secure_route(
    gateway_factory: Callable[..., Any], tmp_path: Path
) -> None:
    key_file = tmp_path / "issuer.pem"
    gateway = gateway_factory(
        "--demo", SLUICE_DEMO_PIPELINE="0", SLUICE_DEV_ISSUER="1", SLUICE_DEV_ISSUER_KEY_FILE=str(key_file)
    )
    assert key_file.exists()
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(WAIT)) as http:
        page = await http.get("/", headers={"accept": "text/html"})
        assert page.status_code == 200
        for path in ("/demo/scores", "/demo/live", "/demo/leagues/{league}", "/demo/secure/leagues/{league}"):
            assert f'data-path="{path}"' in page.text
        filtered_page = await http.get("/viewer/scores/")
        assert filtered_page.status_code == 200
        assert '<code id="route">/demo/live</code>' in filtered_page.text
        # The demo route takes a client filter; "goals" is there for it (the language has no arithmetic).
        async with open_stream(http, "/demo/live", params={"where": "value.goals >= 0"}) as stream:
            (live, *_) = await stream.read_messages(1)
        assert json.loads(live.data)["goals"] == sum(json.loads(live.data)["score"])
        async with open_stream(http, "/demo/leagues/premier") as stream:
            (first, *_) = await stream.read_messages(1)
        score = json.loads(first.data)
        assert score["league"] == "premier"
        assert {"match", "home", "away", "score", "minute"} <= set(score)
        refused = await http.get("/demo/secure/leagues/premier")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="demo"'


@pytest.mark.skipif(shutil.which("java") is None, reason="the demo's Spark pipeline needs java")
async def test_demo_pipeline_shapes_raw_reports_into_a_streamed_topic(
    gateway_factory: Callable[..., Any], tmp_path: Path
) -> None:
    """raw -> Spark -> Kafka -> SSE: the demo's pipeline output arrives on its route, one league."""
    from demo.pipeline import DEMO_PIPELINE_ROUTE

    gateway = gateway_factory(
        "--demo", SLUICE_DEMO_PIPELINE="1", SLUICE_DEV_ISSUER_KEY_FILE=str(tmp_path / "issuer.pem")
    )
    path = DEMO_PIPELINE_ROUTE.replace("{league}", "liga")
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(SPARK_WAIT)) as http,
        open_stream(http, path) as stream,
    ):
        await stream.read_until(lambda s: len(s.messages) >= 3, limit=SPARK_WAIT)
    scores = [json.loads(event.data) for event in stream.messages]
    assert {score["league"] for score in scores} == {"liga"}
    assert all(score["match"].startswith("match-") and len(score["score"]) == 2 for score in scores)
