from __future__ import annotations

from django.apps import AppConfig


class CommonConfig(AppConfig):
    """Base code the apps share: validated upserts, config-file sections, REST API pieces."""

    name = "common"
    verbose_name = "Common"
