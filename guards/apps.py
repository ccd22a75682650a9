from __future__ import annotations

from django.apps import AppConfig


class GuardsConfig(AppConfig):
    name = "guards"
    verbose_name = "Guards"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from common.config.section import section_register

        from .configsection import GuardSection

        section_register(GuardSection())
