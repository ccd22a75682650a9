from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    """``runstreams --demo``: live football scores, a guarded route and a Spark pipeline, on the embedded broker."""

    name = "demo"
    verbose_name = "Demo"
