"""Reading a configuration file: Sluice's own format, or a Zilla or AsyncAPI document translated to it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common.config.document import Document, document_read
from streams.config.asyncapi_import import asyncapi_translate
from streams.config.engine import ConfigReport, config_apply
from streams.config.zilla import zilla_translate


@dataclass
class LoadedConfig:
    """A file read and, if it was a Zilla or AsyncAPI document, translated to Sluice's sections."""

    document: Document
    kind: str
    skipped: list[tuple[str, str]] = field(default_factory=list)


def document_kind(data: Any) -> str:
    """``asyncapi``, ``zilla`` or ``sluice``, from the top-level keys."""
    if not isinstance(data, dict):
        return "sluice"
    if "asyncapi" in data:
        return "asyncapi"
    if "bindings" in data or "name" in data or isinstance(data.get("guards"), dict):
        return "zilla"
    return "sluice"


def config_load(path: str) -> LoadedConfig:
    """Read ``path`` and bring it to Sluice's own format (:class:`ConfigError` if it cannot be)."""
    document = document_read(path)
    kind = document_kind(document.data)
    if kind == "sluice":
        return LoadedConfig(document, kind)
    translation = zilla_translate(document) if kind == "zilla" else asyncapi_translate(document)
    return LoadedConfig(translation.document, kind, translation.skipped)


def config_apply_file(
    path: str, *, prune: bool = False, check: bool = False, checked: Callable[[ConfigReport], None] | None = None
) -> ConfigReport:
    """Load, translate if needed, and apply the file at ``path`` (``checked``: see :func:`config_apply`)."""
    loaded = config_load(path)
    report = ConfigReport(loaded.document.filename, kind=loaded.kind, skipped=loaded.skipped)
    return config_apply(loaded.document, prune=prune, check=check, report=report, checked=checked)
