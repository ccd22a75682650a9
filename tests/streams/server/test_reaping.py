"""daphne's connection checks on events: a connection is looked at when its app ends or its client leaves."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from twisted.web import http

from streams.server import reaping
from streams.server.reaping import EventReaping


class _Scheduler:
    def __init__(self) -> None:
        self.calls: list[tuple[float, Any]] = []

    def callLater(self, delay: float, function: Any) -> None:
        self.calls.append((delay, function))


class _DaphneServer:
    """The part of ``daphne.server.Server`` the mixin builds on."""

    def __init__(self) -> None:
        self.application_close_timeout = 5.0
        self.http_timeout: float | None = None
        self.stopped = False

    def run(self) -> None:
        self.connections: dict[Any, dict[str, Any]] = {}

    def protocol_connected(self, protocol: Any) -> None:
        self.connections[protocol] = {"connected": time.time()}

    def protocol_disconnected(self, protocol: Any) -> None:
        self.connections[protocol].setdefault("disconnected", time.time())

    def stop(self) -> None:
        self.stopped = True


class _Server(EventReaping, _DaphneServer):
    pass


class _Request(http.Request):
    """An HTTP request protocol (no channel needed for these checks)."""

    def __init__(self) -> None:
        self.timeouts_checked = 0
        self.exceptions: list[BaseException] = []

    def check_timeouts(self) -> None:
        self.timeouts_checked += 1

    def handle_exception(self, exception: BaseException) -> None:
        self.exceptions.append(exception)


class _WebSocket:
    def __init__(self) -> None:
        self.timeouts_checked = 0

    def check_timeouts(self) -> None:
        self.timeouts_checked += 1


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> _Server:
    monkeypatch.setattr(reaping, "reactor", _Scheduler())
    server = _Server()
    server.run()
    return server


def _open(server: _Server, protocol: Any, instance: asyncio.Future[Any]) -> None:
    server.protocol_connected(protocol)
    server.connections[protocol]["application_instance"] = instance
    server.application_watch(protocol)


async def _settled() -> None:
    """Let done-callbacks run (they are scheduled with call_soon)."""
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_idle_connections_are_not_looked_at(server: _Server) -> None:
    loop = asyncio.get_running_loop()
    protocols = [_Request() for _ in range(100)]
    for protocol in protocols:
        _open(server, protocol, loop.create_future())
    server.application_checker()
    server.timeout_checker()
    assert server._due == {}
    assert server._timed == {}
    assert all(protocol.timeouts_checked == 0 for protocol in protocols)
    assert len(server.connections) == 100
    assert [delay for delay, _ in reaping.reactor.calls] == [1, 2]  # type: ignore[attr-defined]


async def test_a_finished_app_is_reaped_and_the_connection_dropped_once_its_client_leaves(server: _Server) -> None:
    loop = asyncio.get_running_loop()
    protocol, instance = _Request(), loop.create_future()
    _open(server, protocol, instance)
    instance.set_result(None)
    await _settled()
    server.application_checker()
    assert "application_instance" not in server.connections[protocol]
    assert protocol not in server._due  # a response still open after its app: nothing to look at
    server.protocol_disconnected(protocol)
    server.application_checker()
    assert protocol not in server.connections
    assert server._due == {}


async def test_an_app_that_outlives_its_client_by_the_close_timeout_is_cancelled(server: _Server) -> None:
    loop = asyncio.get_running_loop()
    protocol, instance = _Request(), loop.create_future()
    _open(server, protocol, instance)
    server.protocol_disconnected(protocol)
    server.application_checker()
    assert not instance.cancelled()  # within the timeout: the app gets the time to finish
    assert protocol in server._due
    server.connections[protocol]["disconnected"] -= server.application_close_timeout + 1
    server.application_checker()
    assert instance.cancelled()
    await _settled()
    server.application_checker()
    assert protocol not in server.connections
    assert server._due == {}


async def test_an_app_that_failed_is_logged_and_its_client_answered(
    server: _Server, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    protocol, instance = _Request(), loop.create_future()
    _open(server, protocol, instance)
    instance.set_exception(ValueError("boom"))
    await _settled()
    with caplog.at_level(logging.ERROR, logger="daphne.server"):
        server.application_checker()
    assert [type(error) for error in protocol.exceptions] == [ValueError]
    assert "Exception inside application: boom" in caplog.text
    assert not server.stopped


async def test_timeouts_are_checked_for_websockets_and_for_http_when_it_has_a_timeout(server: _Server) -> None:
    loop = asyncio.get_running_loop()
    socket, request = _WebSocket(), _Request()
    _open(server, socket, loop.create_future())
    _open(server, request, loop.create_future())
    server.timeout_checker()
    assert (socket.timeouts_checked, request.timeouts_checked) == (1, 0)
    server.http_timeout = 60
    later = _Request()
    _open(server, later, loop.create_future())
    server.timeout_checker()
    assert (socket.timeouts_checked, later.timeouts_checked) == (2, 1)
    del server.connections[socket]
    server.timeout_checker()
    assert socket not in server._timed
