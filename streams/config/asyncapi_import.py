"""Import of an AsyncAPI 3 document: the Sluice items it carries under ``x-sluice`` (as ``/asyncapi.json`` has them)."""

from __future__ import annotations

from typing import Any

from common.config.document import ConfigError, DocPath, Document, Translation


def asyncapi_translate(source: Document) -> Translation:
    """The Sluice items an AsyncAPI document carries (``x-sluice``); channels without one are skipped."""
    translation = Translation(source)
    data = source.data
    out = translation.document.data
    version = str(data.get("asyncapi", ""))
    if not version.startswith("3."):
        raise ConfigError([source.problem(("asyncapi",), f"only AsyncAPI 3 documents are imported, not {version}")])
    extension = data.get("x-sluice") or {}
    if not isinstance(extension, dict):
        raise ConfigError([source.problem(("x-sluice",), "must be a mapping of sections")])
    for name, items in extension.items():
        out[name] = items
        translation.carry((name,), ("x-sluice", name), items)
    routes: list[Any] = []
    channels = data.get("channels") or {}
    for cid, channel in channels.items() if isinstance(channels, dict) else []:
        at: DocPath = ("channels", cid)
        item = channel.get("x-sluice") if isinstance(channel, dict) else None
        if item is None and isinstance(channel, dict) and channel.get("x-sluice-multiplexed"):
            continue  # /streams: Sluice's own, made from the routes
        if item is None:
            translation.skip(at, "no x-sluice route: not a channel Sluice can serve")
            continue
        translation.carry(("routes", len(routes)), (*at, "x-sluice"), item)
        routes.append(item)
    if routes:
        out["routes"] = routes
    return translation
