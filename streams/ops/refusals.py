"""Requests Django refuses as suspicious (a bad ``Host`` header, too many fields, ...): one line each, bounded.

Django logs each such refusal on ``django.security.<Exception>`` at ERROR with
its traceback, about thirty lines. Anyone can send bad ``Host`` headers, so
that is a way to multiply log volume. :class:`RefusalLog` sits on the handler
of ``django.security`` instead: it counts every refusal
(``sluice_requests_refused{reason}`` on ``/metrics``), writes at most a few
access-log lines per client address and minute (status 400, the reason, the
running count and how many lines were held back), and never a traceback.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Any

from prometheus_client import Counter

from streams.edge.http.budget import LineBudget
from streams.edge.http.counters import stream_metrics

access_logger = logging.getLogger("sluice.access")

requests_refused = Counter(
    "sluice_requests_refused",
    "Requests Django refused as suspicious (bad Host header and the like), by reason.",
    ["reason"],
    registry=stream_metrics,
)


def refusal_reason(logger_name: str) -> str:
    """``django.security.DisallowedHost`` -> ``disallowed_host``."""
    name = logger_name.rpartition(".")[2] or "suspicious"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class RefusalLog(logging.Handler):
    """The handler of ``django.security``: each refusal is counted, and becomes one access line at most."""

    def __init__(self, burst: int = 5, per_minute: float = 5.0) -> None:
        super().__init__(logging.INFO)
        self.budget = LineBudget(burst=burst, per_minute=per_minute)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        reason = refusal_reason(record.name)
        requests_refused.labels(reason).inc()
        count = self.counts[reason] = self.counts.get(reason, 0) + 1
        request: Any = getattr(record, "request", None)
        meta = getattr(request, "META", {}) or {}
        client = str(meta.get("REMOTE_ADDR", ""))
        held_back = self.budget.take(client, time.monotonic())
        if held_back is not None:
            entry = {
                "event": "refused",
                "path": str(getattr(request, "path", "")),
                "method": str(getattr(request, "method", "") or ""),
                "status": int(getattr(record, "status_code", 400)),
                "client": client,
                "reason": reason,
                "detail": record.getMessage()[:200],
                "count": count,
                "held_back": held_back,
            }
            # The access line replaces Django's record, and its traceback.
            access_logger.info(json.dumps(entry, separators=(",", ":")))
