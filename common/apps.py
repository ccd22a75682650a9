from __future__ import annotations

from django.apps import AppConfig


class CommonConfig(AppConfig):
    """Base code the apps share: validated upserts, config-file sections, REST API pieces, app settings."""

    name = "common"
    verbose_name = "Common"

    def ready(self) -> None:
        from common.conf import settings_check

        settings_check()
