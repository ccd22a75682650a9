"""Middleware the apps share."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse


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
