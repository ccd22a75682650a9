"""App settings as simplejwt's ``api_settings``: defaults beside the app, typed attribute access, one dict.

Each app declares a frozen dataclass of its settings with their defaults in its
``conf`` module; the deployment's values come from the namespaced
``settings.SLUICE`` dict (which ``project/settings.py`` fills from the
environment). The object is built on first use and again after
``override_settings(SLUICE=...)`` in tests.

Every :func:`app_settings` call registers its dataclass, so a key that no
installed app declares (a typo, a setting that was removed) is an error at start
(:func:`settings_check`, run by ``CommonConfig.ready``) rather than silently ignored.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from typing import Any, Generic, TypeVar, cast

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

T = TypeVar("T")

# Each app's settings dataclass, by the key names it declares (filled as the ``conf`` modules load).
SETTINGS_CLASSES: dict[type[Any], frozenset[str]] = {}


def _sluice() -> dict[str, Any]:
    return getattr(settings, "SLUICE", {}) or {}


class AppSettings(Generic[T]):
    """Attribute access to ``defaults_class``'s fields, overridden by the same keys in ``settings.SLUICE``."""

    def __init__(self, defaults_class: type[T]) -> None:
        self._defaults_class = defaults_class
        self._names = frozenset(f.name for f in dataclasses.fields(cast(Any, defaults_class)))
        self._current: T | None = None
        SETTINGS_CLASSES[defaults_class] = self._names
        setting_changed.connect(self._changed, weak=False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.current, name)

    @property
    def current(self) -> T:
        if self._current is None:
            given = _sluice()
            if apps.apps_ready:
                settings_check(given)
            self._current = self._defaults_class(**{k: v for k, v in given.items() if k in self._names})
        return self._current

    def _changed(self, *, setting: str, **kwargs: Any) -> None:
        if setting == "SLUICE":
            self._current = None


def app_settings(defaults_class: type[T]) -> T:
    """An :class:`AppSettings` typed as the dataclass it reads (attribute access is the dataclass's)."""
    return cast(T, AppSettings(defaults_class))


def settings_known() -> frozenset[str]:
    """Every key some installed app's settings declare (each app's ``conf`` module is loaded first)."""
    for config in apps.get_app_configs():
        module = f"{config.name}.conf"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
    return frozenset().union(*SETTINGS_CLASSES.values())


def settings_check(given: dict[str, Any] | None = None) -> None:
    """Raise ``ImproperlyConfigured`` naming the first key of ``settings.SLUICE`` that no app declares."""
    known = settings_known()
    for key in sorted(_sluice() if given is None else given):
        if key not in known:
            raise ImproperlyConfigured(f"Unknown SLUICE setting {key!r}; known: {', '.join(sorted(known))}")
