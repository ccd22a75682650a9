"""Settings for the test suite: development defaults, a file database the gateway can share."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("SLUICE_DEV", "1")
os.environ.setdefault("SLUICE_ROUTE_CACHE_SECONDS", "0")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault(
        "SLUICE_TEST_DB_NAME", os.path.join(tempfile.gettempdir(), f"sluice-test-{os.getpid()}.sqlite3")
    )

from .settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
