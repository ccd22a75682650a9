"""Where a stream ends: its StreamEnd gives back what it holds once, when the app returns or when the stream ends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from streams.core.closing import CloseReason
from streams.edge.authorization.reconfiguration import OpenStream
from streams.edge.runtime import WorkerRuntime
from streams.edge.streaming.ending import StreamEnd
from streams.edge.streaming.source import future_then
from tests.support.route_specs import route_spec

SCOPE: dict[str, Any] = {"type": "http", "method": "GET", "client": ("192.0.2.7", 40000)}


class FakeSource:
    def __init__(self) -> None:
        self.closed: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.close_reason: str | None = None
        self.done: list[str] = []

    def on_closed(self, callback: Callable[[], object]) -> None:
        future_then(self.closed, callback)

    def end(self, reason: str) -> None:
        if not self.closed.done():
            self.close_reason = reason
            self.closed.set_result(reason)

    def detach(self) -> None:
        self.done.append("detached")


class FakeFlow:
    def __init__(self) -> None:
        self.done: list[str] = []

    def release(self) -> None:
        self.done.append("released")

    def finish(self) -> None:
        self.done.append("finished")


def held(runtime: WorkerRuntime, end: StreamEnd, source: FakeSource) -> OpenStream:
    end.address_hold(SCOPE)
    end.source_hold(source)  # type: ignore[arg-type]
    watch = OpenStream(route_spec(), SCOPE, {}, end=source.end)
    end.watch([watch])
    return watch


async def test_everything_held_is_given_back_once_when_the_app_returns() -> None:
    runtime, source = WorkerRuntime(), FakeSource()
    end = StreamEnd(runtime, None)
    held(runtime, end, source)
    assert len(runtime.addresses) == 1
    assert len(runtime.open_streams()) == 1
    end.returned()
    assert source.done == ["detached"]
    assert len(runtime.addresses) == 0
    assert len(runtime.open_streams()) == 0
    end.returned()
    assert source.done == ["detached"]  # once


async def test_a_handed_off_stream_ends_when_its_source_ends_not_when_its_app_returns() -> None:
    runtime, source, flow = WorkerRuntime(), FakeSource(), FakeFlow()
    end = StreamEnd(runtime, flow)  # type: ignore[arg-type]
    held(runtime, end, source)
    end.hand_off(source.on_closed)
    end.returned()
    await asyncio.sleep(0)
    assert source.done == []
    assert len(runtime.addresses) == 1
    source.end(CloseReason.EXPIRED)
    await asyncio.sleep(0)
    assert source.done == ["detached"]
    assert flow.done == ["released", "finished"]
    assert len(runtime.addresses) == 0


async def test_a_client_gone_gets_no_end_of_response() -> None:
    runtime, source, flow = WorkerRuntime(), FakeSource(), FakeFlow()
    end = StreamEnd(runtime, flow)  # type: ignore[arg-type]
    held(runtime, end, source)
    end.hand_off(source.on_closed)
    end.client_gone()
    await asyncio.sleep(0)
    assert source.close_reason == "client"
    assert flow.done == ["released"]


async def test_a_failing_step_is_logged_and_the_slot_is_still_given_back(caplog: pytest.LogCaptureFixture) -> None:
    runtime, source = WorkerRuntime(), FakeSource()
    end = StreamEnd(runtime, None)
    held(runtime, end, source)

    def detach() -> None:
        raise ZeroDivisionError

    source.detach = detach  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="sluice.streams"):
        end.returned()
    assert "cleaning up a stream failed" in caplog.text
    assert len(runtime.addresses) == 0


def test_the_runtime_serves_the_embedded_broker_without_rewriting_settings() -> None:
    runtime = WorkerRuntime("127.0.0.1:19092")
    assert runtime.default_cluster.bootstrap == "127.0.0.1:19092"
    assert runtime.hubs_if_started() is None
    assert runtime.upstreams_if_started() is None
