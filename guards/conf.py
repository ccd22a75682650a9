"""The guards app's settings and their defaults: ``from guards.conf import guards_settings``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from common.conf import app_settings


def _issuer_key_file() -> Path:
    return Path(settings.BASE_DIR) / "var" / "dev-issuer.pem"


@dataclass(frozen=True)
class GuardsSettings:
    # The development token issuer (POST /auth/token for signed-in users; `runstreams --demo`
    # registers its key as the `demo` guard). project/settings.py turns it on with DEBUG.
    DEV_ISSUER: bool = False
    DEV_ISSUER_KEY_FILE: Path = field(default_factory=_issuer_key_file)
    # SLUICE_CORS_ALLOW_ORIGINS, declared by the streams app too: the origins routes without their own
    # inherit, which the development issuer answers for the demo guard's routes (guards/crossorigin.py).
    CORS_ALLOW_ORIGINS: tuple[str, ...] = ()
    # Admitted tokens each worker remembers (guards/verified.py), each until its exp: a client that comes
    # back with one skips its signature check (the claims are checked every time). About 1.4 KB each for
    # a 270-byte token; 0 remembers none (docs/operations.md, "Verified tokens").
    VERIFIED_TOKENS: int = 10000


guards_settings = app_settings(GuardsSettings)
