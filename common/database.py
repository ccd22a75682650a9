"""The database as this process last found it: answering, or away since a given moment.

A database that stops answering (restarted, failed over, out of reach) is an
outage of the configuration, not of the streams: what was read before it is
kept and served (``streams.selectors``), the admin and the API answer 503 with
``Retry-After`` (:class:`~common.middleware.DatabaseUnavailableAnswer`), and the
log says so once when it goes and once when it is back, never a traceback per
request. Whoever reaches the database tells :data:`database_watch` how it went.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TypeVar

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

logger = logging.getLogger("sluice.database")

R = TypeVar("R", bound=HttpResponse)

# The errors that mean "the database is not there" (refused, reset, timed out, closed under us), as
# Django wraps the driver's. Others (an integrity error, a missing table) are bugs and stay errors.
DATABASE_AWAY = (OperationalError, InterfaceError)
# What a refused request tells its client: ask again in this many seconds.
RETRY_AFTER_SECONDS = 5
# A read that failed is tried again at most this often (by whoever needs it next).
RETRY_SECONDS = 1.0


class DatabaseWatch:
    """Whether the database answered the last time anyone asked, since when not, and what was served meanwhile."""

    def __init__(self) -> None:
        self.away_since: float | None = None
        self.cause = ""
        # Requests answered from configuration read before the database went away.
        self.stale_served = 0

    @property
    def away(self) -> bool:
        return self.away_since is not None

    def failed(self, exc: BaseException) -> None:
        """The database did not answer; the first failure of an outage is logged (one line)."""
        if self.away_since is not None:
            return
        self.away_since = time.monotonic()
        lines = str(exc).strip().splitlines()
        self.cause = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
        logger.warning(
            "database unavailable (%s): serving the routes read before it, the admin and the API answer 503; "
            "retried every %.0f s",
            self.cause,
            RETRY_SECONDS,
        )

    def answered(self) -> None:
        """The database answered; the first answer after an outage is logged (one line)."""
        since = self.away_since
        if since is None:
            return
        self.away_since = None
        self.cause = ""
        logger.warning("database back after %.1f s", time.monotonic() - since)

    def stale_seconds(self) -> float:
        """How long what is served has been possibly out of date (0 while the database answers)."""
        since = self.away_since
        return 0.0 if since is None else time.monotonic() - since


# One per process, like the database connections it watches.
database_watch = DatabaseWatch()


def database_reachable() -> bool:
    """Connect now and let go (at start: say at once, in one line, if the database is away); True if it answered."""
    from django.db import connection

    try:
        connection.ensure_connection()
    except DATABASE_AWAY as exc:
        database_watch.failed(exc)
        return False
    finally:
        connection.close()  # this thread serves no request: keep no session open for the process's life
    database_watch.answered()
    return True


def quietly(response: R) -> R:
    """``response`` not logged by Django's request logger (an expected answer, e.g. 503 while the database is away).

    ``_has_been_logged`` is the mark Django's ``log_response`` itself sets and checks.
    """
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sluice: database unavailable</title></head>
<body><h1>Database unavailable</h1>
<p>Sluice cannot reach its database right now. Open streams go on; this page works again once it answers.</p>
<p>Try again in a few seconds.</p></body></html>
"""


def database_unavailable_response(request: HttpRequest) -> HttpResponse:
    """503 with ``Retry-After``: a JSON body, or a short page for a browser navigating (it asked for HTML)."""
    if "text/html" in request.headers.get("accept", ""):
        response = HttpResponse(_PAGE, status=503, content_type="text/html; charset=utf-8")
    else:
        body = {
            "error": "database_unavailable",
            "status": 503,
            "detail": "the database does not answer; try again shortly",
        }
        response = HttpResponse(json.dumps(body), status=503, content_type="application/json")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return quietly(response)
