"""Middleware the apps share."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

from common.database import DATABASE_AWAY, database_unavailable_response, database_watch


class SecureCookiesOverTLS:
    """Cookies set on an HTTPS response are HTTPS-only.

    ``runstreams --tls-cert`` serves HTTPS itself, so whether a request is secure
    is known per request; the settings do not have to change at run time.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if request.is_secure():
            for morsel in response.cookies.values():
                morsel["secure"] = True
        return response


class DatabaseUnavailableAnswer(MiddlewareMixin):
    """A view that finds the database away answers 503 with ``Retry-After``, not 500 and a traceback.

    JSON for the API and scripts, a short page for a browser in the admin. The
    outage is logged once (:data:`~common.database.database_watch`), not per request.
    """

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DATABASE_AWAY):
            return None
        database_watch.failed(exception)
        return database_unavailable_response(request)
