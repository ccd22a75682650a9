"""Requests Django refuses as suspicious: counted, one access line each at most, rate-limited, never a traceback."""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from streams.ops.refusals import LineBudget, RefusalLog, refusal_reason
from tests.conftest import Gateway


def test_refusal_reason_from_the_logger_name() -> None:
    assert refusal_reason("django.security.DisallowedHost") == "disallowed_host"
    assert refusal_reason("django.security.TooManyFieldsSent") == "too_many_fields_sent"


def test_line_budget_is_per_client_refills_and_reports_what_it_held_back() -> None:
    budget = LineBudget(burst=2, per_minute=6.0, total_per_minute=1000)
    assert [budget.take("a", 0.0) for _ in range(4)] == [0, 0, None, None]
    assert budget.take("b", 0.0) == 0  # another address has its own budget
    assert budget.take("a", 5.0) is None  # half a line refilled
    assert budget.take("a", 10.0) == 3  # one line refilled: it says three were held back


def test_line_budget_bounds_all_clients_together_and_forgets_the_oldest() -> None:
    budget = LineBudget(burst=5, per_minute=5.0, clients=3, total_per_minute=4)
    allowed = [budget.take(f"10.0.0.{n}", 0.0) for n in range(10)]
    assert allowed.count(0) == 4
    assert len(budget._allowances) == 3


def test_refusal_log_writes_one_access_line_without_the_traceback(caplog: pytest.LogCaptureFixture) -> None:
    handler = RefusalLog(burst=1, per_minute=1.0)
    request = type("Request", (), {"META": {"REMOTE_ADDR": "192.0.2.7"}, "path": "/healthz", "method": "GET"})()
    try:
        raise ValueError("Invalid HTTP_HOST header: 'evil.example'.")
    except ValueError as exc:
        error = exc
    records = [
        logging.LogRecord(
            "django.security.DisallowedHost", logging.ERROR, __file__, 1, str(error), (), (ValueError, error, None)
        )
        for _ in range(3)
    ]
    for record in records:
        record.request = request
        record.status_code = 400
    with caplog.at_level(logging.INFO, logger="sluice.access"):
        for record in records:
            handler.handle(record)
    [line] = [r for r in caplog.records if r.name == "sluice.access"]
    entry = json.loads(line.getMessage())
    assert entry["event"] == "refused"
    assert entry["status"] == 400
    assert entry["reason"] == "disallowed_host"
    assert entry["client"] == "192.0.2.7"
    assert entry["count"] == 1
    assert line.exc_info is None
    assert handler.counts == {"disallowed_host": 3}


@pytest.mark.services
async def test_a_thousand_bad_host_headers_leave_few_lines_and_no_traceback(
    gateway_factory: Callable[..., Gateway],
) -> None:
    server = gateway_factory()
    before = len(server.output)
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for n in range(1000):
            response = await client.get("/healthz", headers={"host": f"evil-{n}.example"})
            assert response.status_code == 400
            assert response.json()["error"] == "bad_request"
        # Counted while the request is answered: every refusal is in by now.
        metrics = (await client.get("/metrics")).text
    counted = {
        sample.labels["reason"]: sample.value
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "sluice_requests_refused_total"
    }
    assert counted == {"disallowed_host": 1000}
    lines: list[str] = server.output[before:]
    assert not [line for line in lines if "Traceback" in line or "DisallowedHost" in line]
    refused: list[dict[str, Any]] = [
        json.loads(line.split(": ", 1)[1]) for line in lines if '"event":"refused"' in line
    ]
    # Five lines at once, then five a minute: the bound grows with how long the thousand requests took.
    bound = 5 + math.ceil(5 * (time.monotonic() - started) / 60)
    assert 1 <= len(refused) <= bound, refused
    assert {entry["status"] for entry in refused} == {400}
    assert refused[0]["reason"] == "disallowed_host"
    assert refused[0]["path"] == "/healthz"
