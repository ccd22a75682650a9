"""The demo's page: live scores narrowed by goals or minute, a value filter the page sends through sluice.js."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from demo.scores import DEMO_LIVE_ROUTE


def scores(request: HttpRequest) -> HttpResponse:
    """The board of live scores; the page opens ``DEMO_LIVE_ROUTE`` with sluice.js's ``where`` option."""
    return render(request, "demo/scores.html", {"route": DEMO_LIVE_ROUTE})
