"""PostgreSQL goes away under 200 open streams while new ones keep arriving, then comes back.

The gateway reaches the database through a TCP forwarder the test cuts (the
listening socket closed, every session reset: as a stopped server) for
``SLUICE_FAULT_DATABASE_SECONDS`` (30 s by default) and restores. Meanwhile:
liveness stays 200, readiness is 503 naming the database, new streams on known
routes are served from the route table read before, the API answers a JSON 503
and the admin a page, each with ``retry-after``; the log holds one line when it
goes and one when it is back, no traceback; within 5 s of its return every
answer is normal again, and the ledger finds nothing lost or doubled.

PostgreSQL only (``services``): on SQLite there is no server to lose.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, database_url
from tests.faults.harness import (
    PARTITIONS,
    LedgerProducer,
    ResumingClient,
    clients_caught_up,
    clients_start,
    clients_stop,
    ledger_check,
    produced_past,
)
from tests.support.metrics_scrape import metrics_parse
from tests.support.polling import condition_wait_async
from tests.support.tcp_proxy import TcpProxy

pytestmark = [pytest.mark.slow, pytest.mark.services]

OUTAGE_SECONDS = float(os.environ.get("SLUICE_FAULT_DATABASE_SECONDS", "30"))
STREAMS = 200
ARRIVING = 20  # resuming clients that first connect while the database is away
SETTLE_SECONDS = 2.0  # after the cut, for cached answers (readiness: 1 s; route table: 1 s) to run out
RECOVERY_LIMIT = 5.0


@pytest.fixture
def database_proxy(stream_db: None) -> Iterator[TcpProxy]:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the database outage needs PostgreSQL (DATABASE_URL): SQLite has no server to lose")
    settings = connection.settings_dict
    proxy = TcpProxy(settings.get("HOST") or "127.0.0.1", int(settings.get("PORT") or 5432)).start()
    yield proxy
    proxy.stop()


@dataclass
class Observed:
    """What the probes saw, by phase (before, away, back) and endpoint."""

    statuses: dict[tuple[str, str], Counter[int]] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)

    def saw(self, phase: str, endpoint: str, status: int) -> None:
        self.statuses.setdefault((phase, endpoint), Counter())[status] += 1

    def of(self, phase: str, endpoint: str) -> Counter[int]:
        return self.statuses.get((phase, endpoint), Counter())


class Prober:
    """Every half second: liveness, readiness, the API, the admin and a new stream on a known route."""

    def __init__(self, http: httpx.AsyncClient, stream_path: str, token: str, session: str) -> None:
        self.http = http
        self.stream_path = stream_path
        self.token = token
        self.session = session
        self.phase = "before"
        self.in_flight: str | None = None  # the phase of the round of probes under way
        self.observed = Observed()

    async def run(self) -> None:
        while True:
            phase = self.in_flight = self.phase
            await asyncio.gather(self._healthz(phase), self._readyz(phase), self._api(phase), self._admin(phase))
            await self._stream(phase)
            self.in_flight = None
            await asyncio.sleep(0.5)

    async def phase_next(self, phase: str) -> None:
        """Start ``phase`` once the round of probes under way (of the phase before) is done."""
        previous, self.phase = self.phase, phase
        await condition_wait_async(lambda: self.in_flight != previous, within=30, what=f"the {previous} probes")

    async def _healthz(self, phase: str) -> None:
        answer = await self.http.get("/healthz")
        self.observed.saw(phase, "healthz", answer.status_code)

    async def _readyz(self, phase: str) -> None:
        answer = await self.http.get("/readyz")
        self.observed.saw(phase, "readyz", answer.status_code)
        if phase == "away" and answer.status_code == 503:
            database = answer.json()["checks"]["database"]
            if database["status"] != "down" or not database.get("detail"):
                self.observed.wrong.append(f"readyz: {answer.text}")

    async def _api(self, phase: str) -> None:
        answer = await self.http.get("/api/routes/", headers={"authorization": f"Bearer {self.token}"})
        self.observed.saw(phase, "api", answer.status_code)
        if answer.status_code == 503:
            body = answer.json()
            if body.get("error") != "database_unavailable" or not answer.headers.get("retry-after"):
                self.observed.wrong.append(f"api: {answer.headers} {answer.text}")

    async def _admin(self, phase: str) -> None:
        answer = await self.http.get("/admin/", headers={"accept": "text/html", "cookie": f"sessionid={self.session}"})
        self.observed.saw(phase, "admin", answer.status_code)
        if answer.status_code == 503:
            html = answer.headers.get("content-type", "").startswith("text/html")
            if not html or "Database unavailable" not in answer.text or not answer.headers.get("retry-after"):
                self.observed.wrong.append(f"admin: {answer.headers} {answer.text[:200]}")

    async def _stream(self, phase: str) -> None:
        async with self.http.stream("GET", self.stream_path, headers={"accept": "text/event-stream"}) as answer:
            self.observed.saw(phase, "new stream", answer.status_code)


async def all_normal(http: httpx.AsyncClient, prober: Prober) -> bool:
    answers = [
        await http.get("/readyz"),
        await http.get("/api/routes/", headers={"authorization": f"Bearer {prober.token}"}),
        await http.get("/admin/", headers={"accept": "text/html", "cookie": f"sessionid={prober.session}"}),
    ]
    return all(answer.status_code == 200 for answer in answers)


def staff_session_and_token() -> tuple[str, str]:
    """A staff account's admin session and API token, made here in the database the gateway shares."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from rest_framework_simplejwt.tokens import AccessToken

    name = f"ops-{uuid.uuid4().hex[:8]}"
    user = get_user_model().objects.create_superuser(name, f"{name}@example.com", "pw-for-tests")
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value, str(AccessToken.for_user(user))


async def test_database_away_keeps_streams_liveness_and_known_routes_and_loses_nothing(
    gateway_factory: Callable[..., Gateway],
    kafka: Any,
    fault_paths: Any,
    fault_report: Any,
    database_proxy: TcpProxy,
) -> None:
    from django.db import connection

    topic = kafka.topic(partitions=PARTITIONS)
    paths = fault_paths(topic, STREAMS)
    proxied = database_url({**connection.settings_dict, "HOST": "127.0.0.1", "PORT": database_proxy.port})
    # The production cache time: the table is read again every second, so the outage is seen at once.
    gateway = gateway_factory(DATABASE_URL=proxied, SLUICE_ROUTE_CACHE_SECONDS="1")
    session, token = staff_session_and_token()
    producer = LedgerProducer(kafka.bootstrap, topic)
    producer.start()
    clients = await clients_start(gateway.port, paths, within=90)
    arriving: list[ResumingClient] = []
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(30)) as http:
        prober = Prober(http, paths[0][0], token, session)
        probing = asyncio.ensure_future(prober.run())
        try:
            await produced_past(producer, 40)
            database_proxy.cut()
            cut_at = time.monotonic()
            await asyncio.sleep(SETTLE_SECONDS)
            await prober.phase_next("away")
            for n in range(ARRIVING):  # new streams keep arriving, each held to the ledger too
                path, group = paths[n % len(paths)]
                client = ResumingClient(gateway.port, path, group)
                client.start()
                arriving.append(client)
                await asyncio.sleep((OUTAGE_SECONDS - SETTLE_SECONDS - 2) / ARRIVING)
            metrics_away = (await http.get("/metrics")).text
            await condition_wait_async(
                lambda: time.monotonic() - cut_at >= OUTAGE_SECONDS, within=OUTAGE_SECONDS + 5, what="the outage's end"
            )
            await prober.phase_next("back")
            database_proxy.restore()
            restored_at = time.monotonic()
            await condition_wait_async(lambda: all_normal(http, prober), within=30, what="normal answers", interval=0.1)
            recovery = time.monotonic() - restored_at
            await produced_past(producer, 40)
        finally:
            probing.cancel()
            await asyncio.gather(probing, return_exceptions=True)
        metrics_back = (await http.get("/metrics")).text
    everyone = [*clients, *arriving]
    try:
        produced = await asyncio.to_thread(producer.finish)
        await clients_caught_up(everyone, producer)
    finally:
        await clients_stop(everyone)
        gateway.stop()
    verdict = ledger_check(everyone, producer)
    observed = prober.observed
    log = "".join(gateway.output)
    away_lines = [line for line in gateway.output if "database unavailable" in line]
    back_lines = [line for line in gateway.output if "database back" in line]
    away, back = metrics_parse(metrics_away), metrics_parse(metrics_back)
    stale_served = back["sluice_route_table_stale_served_total"]
    fault_report(
        f"database away {OUTAGE_SECONDS:.0f}s",
        len(everyone),
        produced,
        verdict,
        max(c.stats.max_recovery for c in everyone),
        f"{ARRIVING} arrived while away; away: healthz {dict(observed.of('away', 'healthz'))}, "
        f"readyz {dict(observed.of('away', 'readyz'))}, new streams {dict(observed.of('away', 'new stream'))}, "
        f"api {dict(observed.of('away', 'api'))}, admin {dict(observed.of('away', 'admin'))}; "
        f"{stale_served:.0f} requests routed by the stale table; normal {recovery:.1f}s after its return",
    )
    for phase in ("before", "away", "back"):
        assert set(observed.of(phase, "healthz")) == {200}, (phase, observed.statuses)
    assert set(observed.of("away", "readyz")) == {503}, observed.statuses
    assert set(observed.of("away", "new stream")) == {200}, observed.statuses
    assert set(observed.of("away", "api")) == {503}, observed.statuses
    assert set(observed.of("away", "admin")) == {503}, observed.statuses
    assert not observed.wrong, observed.wrong[:3]
    assert all(c.stats.sessions >= 1 for c in arriving)
    assert recovery <= RECOVERY_LIMIT
    assert away["sluice_database_available"] == 0
    assert away["sluice_route_table_stale_seconds"] > 0
    assert (back["sluice_database_available"], back["sluice_route_table_stale_seconds"]) == (1, 0)
    assert stale_served > 0
    assert "Traceback" not in log, log[-3000:]
    assert len(away_lines) == 1, away_lines
    assert len(back_lines) == 1, back_lines
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)


async def test_a_gateway_started_with_the_database_away_says_so_once_serves_liveness_and_recovers(
    gateway_factory: Callable[..., Gateway], kafka: Any, fault_paths: Any, database_proxy: TcpProxy
) -> None:
    from django.db import connection

    topic = kafka.topic(partitions=PARTITIONS)
    path = fault_paths(topic, 1)[0][0]
    database_proxy.cut()
    proxied = database_url({**connection.settings_dict, "HOST": "127.0.0.1", "PORT": database_proxy.port})
    gateway = gateway_factory(DATABASE_URL=proxied, SLUICE_ROUTE_CACHE_SECONDS="1")
    async with httpx.AsyncClient(base_url=gateway.url, timeout=httpx.Timeout(30)) as http:
        assert (await http.get("/healthz")).status_code == 200
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["database"]["status"] == "down"
        for _ in range(3):  # no route is known yet: not a 404, a 503 to come back after
            refused = await http.get(path, headers={"accept": "text/event-stream"})
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"] == "database_unavailable"
            assert refused.headers["retry-after"] == "5"
            await asyncio.sleep(0.4)
        database_proxy.restore()
        restored_at = time.monotonic()

        async def served() -> bool:
            async with http.stream("GET", path, headers={"accept": "text/event-stream"}) as answer:
                return answer.status_code == 200

        await condition_wait_async(served, within=30, what="the stream served", interval=0.2)
        recovery = time.monotonic() - restored_at
        assert (await http.get("/readyz")).status_code == 200
    assert recovery <= RECOVERY_LIMIT
    log = "".join(gateway.output)
    assert "Traceback" not in log, log[-3000:]
    assert len([line for line in gateway.output if "database unavailable" in line]) == 1, log
    assert len([line for line in gateway.output if "database back" in line]) == 1, log
