"""``SLUICE_EVENT_LOOP``: the gateway on uvloop streams like on the stdlib loop; a wrong name is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.support.sse_client import EventParser

pytestmark = pytest.mark.services


def test_an_unknown_event_loop_is_refused_with_the_variable_named() -> None:
    env = {**os.environ, "SLUICE_EVENT_LOOP": "trio", "SLUICE_DEV": "1"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "SLUICE_EVENT_LOOP='trio': expected one of asyncio, uvloop" in done.stderr


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
async def test_the_gateway_streams_on_the_event_loop_it_was_given(
    loop: str, gateway_factory: Callable[..., Any], kafka: Any, route: Any
) -> None:
    topic = kafka.topic(partitions=2)
    route(path=f"/loop/{loop}", topic=topic)
    gateway = gateway_factory(SLUICE_EVENT_LOOP=loop)
    assert f"(event loop: {loop})" in "".join(gateway.output)
    parser = EventParser()
    async with (
        httpx.AsyncClient(base_url=gateway.url, timeout=10) as client,
        client.stream("GET", f"/loop/{loop}") as response,
    ):
        assert response.status_code == 200
        chunks = response.aiter_raw()
        assert parser.feed(await anext(chunks))  # the start checkpoint: the stream is live
        for n in range(20):
            kafka.produce(topic, f"m{n}", key=f"k{n}", partition=n % 2)
        got: list[str] = []
        while len(got) < 20:
            got += [e.data for e in parser.feed(await anext(chunks)) if e.has_data]
    assert sorted(got, key=lambda d: int(d[1:])) == [f"m{n}" for n in range(20)]
