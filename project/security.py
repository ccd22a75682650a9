"""Settings that only make sense when clients reach Sluice over TLS (HSTS, cookies sent on HTTPS only).

``SLUICE_TLS=1`` turns them on (TLS terminated by a proxy in front); ``runstreams
--tls-cert`` turns them on for the process it serves.
"""

from __future__ import annotations

from typing import Any

HSTS_SECONDS_DEFAULT = 31_536_000  # a year, as browsers' preload lists expect


def tls_settings(*, hsts_seconds: int = HSTS_SECONDS_DEFAULT) -> dict[str, Any]:
    return {
        "SECURE_HSTS_SECONDS": hsts_seconds,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_CONTENT_TYPE_NOSNIFF": True,
    }
