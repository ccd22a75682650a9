"""The demo app's settings: ``from demo.conf import demo_settings``."""

from __future__ import annotations

from dataclasses import dataclass

from common.conf import app_settings


@dataclass(frozen=True)
class DemoSettings:
    # The Spark pipeline part of `runstreams --demo` (needs java); SLUICE_DEMO_PIPELINE=0 leaves it out.
    DEMO_PIPELINE: bool = True


demo_settings = app_settings(DemoSettings)
