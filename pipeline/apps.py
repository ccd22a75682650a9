from __future__ import annotations

from django.apps import AppConfig


class PipelineConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "pipeline"

    def ready(self) -> None:
        from common.config.section import section_register

        from .configsection import PipelineSection

        section_register(PipelineSection())
