"""The database away, as Django's side answers it: 503 with Retry-After, JSON or a page, never a 500 or a traceback."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.db import IntegrityError, OperationalError
from django.http import HttpResponse
from django.test import RequestFactory

from common.database import DatabaseWatch
from common.middleware import DatabaseUnavailableAnswer


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> DatabaseWatch:
    fresh = DatabaseWatch()
    monkeypatch.setattr("common.middleware.database_watch", fresh)
    return fresh


@pytest.fixture
def session_store_away(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every session read fails as with the database stopped."""

    def load(self: Any) -> dict[str, Any]:
        raise OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused')

    monkeypatch.setattr("django.contrib.sessions.backends.db.SessionStore.load", load)


@pytest.mark.django_db
def test_the_admin_in_a_browser_gets_a_503_page_with_retry_after_and_no_traceback(
    admin_client_logged_in: Any, session_store_away: None, watch: DatabaseWatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        answer = admin_client_logged_in.get("/admin/", HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert answer.status_code == 503
    assert answer["content-type"].startswith("text/html")
    assert answer["retry-after"] == "5"
    assert b"Database unavailable" in answer.content
    assert watch.away
    assert not [r for r in caplog.records if r.exc_info or r.name == "django.request"]


@pytest.mark.django_db
def test_the_api_gets_a_json_503_with_retry_after(
    admin_client_logged_in: Any, session_store_away: None, watch: DatabaseWatch
) -> None:
    answer = admin_client_logged_in.get("/api/routes/", HTTP_ACCEPT="application/json")
    assert answer.status_code == 503
    assert answer["retry-after"] == "5"
    assert answer.json() == {
        "error": "database_unavailable",
        "status": 503,
        "detail": "the database does not answer; try again shortly",
    }


def test_other_database_errors_are_not_an_outage(watch: DatabaseWatch) -> None:
    middleware = DatabaseUnavailableAnswer(lambda request: HttpResponse())
    request = RequestFactory().get("/api/routes/")
    assert middleware.process_exception(request, IntegrityError("duplicate key")) is None
    assert middleware.process_exception(request, ValueError("bug")) is None
    assert not watch.away
