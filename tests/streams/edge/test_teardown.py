"""A stream request's deferred clean-up: when the app returns, or when a handed-off stream ends."""

from __future__ import annotations

import asyncio
import functools
import logging

import pytest

from streams.edge.teardown import Teardown, future_then, stream_teardown, teardown_attach


async def _settled() -> None:
    await asyncio.sleep(0)


def test_the_clean_up_runs_last_in_first_out_when_the_app_returns() -> None:
    teardown = Teardown()
    done: list[str] = []
    teardown.defer(lambda: done.append("address slot"))
    teardown.defer(lambda: done.append("deadlines"))
    teardown.defer(lambda: done.append("stream"))
    teardown.returned()
    assert done == ["stream", "deadlines", "address slot"]
    teardown.returned()
    assert done == ["stream", "deadlines", "address slot"]  # once


async def test_a_handed_off_stream_cleans_up_when_it_ends_not_when_its_app_returns() -> None:
    teardown = Teardown()
    done: list[str] = []
    ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    teardown.defer(lambda: done.append("address slot"))
    teardown.hand_off(functools.partial(future_then, ended))
    teardown.returned()
    await _settled()
    assert done == []
    ended.set_result("client")
    await _settled()
    assert done == ["address slot"]


async def test_a_failing_step_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    teardown = Teardown()
    done: list[str] = []
    teardown.defer(lambda: done.append("address slot"))
    teardown.defer(lambda: 1 / 0)
    with caplog.at_level(logging.ERROR, logger="sluice.streams"):
        teardown.returned()
    assert done == ["address slot"]
    assert "cleaning up a stream failed" in caplog.text


def test_the_router_attaches_it_to_the_scope_for_the_layers_below() -> None:
    scope: dict[str, object] = {"type": "http"}
    teardown = teardown_attach(scope)
    assert stream_teardown(scope) is teardown
