from __future__ import annotations

from django.apps import AppConfig


class StreamsConfig(AppConfig):
    name = "streams"
    verbose_name = "Streams"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from streams import signals  # noqa: F401  (connects the receivers)
        from streams.config.sections import sections_register

        sections_register()
