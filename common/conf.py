"""App settings as simplejwt's ``api_settings``: defaults beside the app, typed attribute access, one dict.

Each app declares a frozen dataclass of its settings with their defaults; the
deployment's values come from the namespaced ``settings.SLUICE`` dict (which
``project/settings.py`` fills from the environment). The object is built on
first use and again after ``override_settings(SLUICE=...)`` in tests.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, TypeVar, cast

from django.conf import settings
from django.core.signals import setting_changed

T = TypeVar("T")


class AppSettings(Generic[T]):
    """Attribute access to ``defaults_class``'s fields, overridden by the same keys in ``settings.SLUICE``."""

    def __init__(self, defaults_class: type[T]) -> None:
        self._defaults_class = defaults_class
        self._names = {f.name for f in dataclasses.fields(cast(Any, defaults_class))}
        self._current: T | None = None
        setting_changed.connect(self._changed, weak=False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.current, name)

    @property
    def current(self) -> T:
        if self._current is None:
            given = getattr(settings, "SLUICE", {}) or {}
            self._current = self._defaults_class(**{k: v for k, v in given.items() if k in self._names})
        return self._current

    def _changed(self, *, setting: str, **kwargs: Any) -> None:
        if setting == "SLUICE":
            self._current = None


def app_settings(defaults_class: type[T]) -> T:
    """An :class:`AppSettings` typed as the dataclass it reads (attribute access is the dataclass's)."""
    return cast(T, AppSettings(defaults_class))
