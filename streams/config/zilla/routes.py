"""Zilla ``sse-kafka`` routes and ``sse`` proxy chains as Sluice routes."""

from __future__ import annotations

import re
from typing import Any

from common.config.document import ConfigError, DocPath, Translation
from streams.config.zilla.conditions import http_conditions, params_fill, served_paths
from streams.config.zilla.graph import ZillaGraph
from streams.config.zilla.guards import entry_guard, route_cors, route_guarded

EVENT_ID_FORMS = {"${etag}": "etag", '["${base64(key)}","${etag}"]': "key"}


GUARDED_IDENTITY = re.compile(r"\$\{guarded\['[^']*'\]\.identity\}")


def kafka_routes(
    translation: Translation, graph: ZillaGraph, name: str, binding: dict[str, Any], start: int
) -> list[dict[str, Any]]:
    source = translation.source
    out: list[dict[str, Any]] = []
    for index, route in enumerate(binding.get("routes") or []):
        at: DocPath = ("bindings", name, "routes", index)
        if not isinstance(route, dict):
            raise ConfigError([source.problem(at, "a route is a mapping")])
        guard, roles = route_guarded(translation, route, at)
        if guard is None:
            guard, roles = entry_guard(graph, name)
        with_ = route.get("with") or {}
        for key in with_:
            if key not in ("topic", "filters", "event"):
                translation.skip((*at, "with", key), "no Sluice equivalent")
        paths = [(w.get("path"), (*at, "when", i, "path")) for i, w in enumerate(route.get("when") or [])]
        if not paths:
            translation.skip(at, "a route without when.path: every Sluice route has a path")
        served = http_conditions(translation, graph, name)
        for path, path_at in paths:
            if not isinstance(path, str):
                translation.skip(path_at[:-1], "only path conditions are imported")
                continue
            for served_path, served_at, params in served_paths(translation, path, path_at, served):
                here: DocPath = ("routes", start + len(out))
                topic = params_fill(with_.get("topic", ""), params)
                item: dict[str, Any] = {"path": served_path, "kind": "sse-kafka", "topic": topic}
                translation.origin(here, at)
                translation.origin((*here, "path"), served_at)
                translation.origin((*here, "topic"), (*at, "with", "topic"))
                if with_.get("filters"):
                    item["filters"] = params_fill(identity_templates(with_["filters"]), params)
                    translation.origin((*here, "filters"), (*at, "with", "filters"))
                out.append(kafka_route_options(translation, graph, name, at, here, with_, item, guard, roles))
    return out


def kafka_route_options(
    translation: Translation,
    graph: ZillaGraph,
    name: str,
    at: DocPath,
    here: DocPath,
    with_: dict[str, Any],
    item: dict[str, Any],
    guard: str | None,
    roles: list[str],
) -> dict[str, Any]:
    """The event id form, guard, CORS and sse options of one imported sse-kafka route."""
    source = translation.source
    event_id = (with_.get("event") or {}).get("id")
    if event_id is not None:
        form = EVENT_ID_FORMS.get(str(event_id).replace(" ", ""))
        if form is None:
            forms = " or ".join(EVENT_ID_FORMS)
            raise ConfigError([source.problem((*at, "with", "event", "id"), f"use {forms}")])
        item["event_id"] = form
    if guard is not None:
        item["guard"], item["roles"] = guard, roles
        translation.origin((*here, "guard"), (*at, "guarded"))
    cors = route_cors(graph, name)
    if cors:
        item["cors"] = cors
    item.update(sse_options(translation, graph, name, here))
    return item


def sse_options(translation: Translation, graph: ZillaGraph, name: str, here: DocPath) -> dict[str, Any]:
    """``retry`` of the sse server in front of binding ``name`` (or of ``name`` itself) as ``retry_ms``."""
    servers = [name] if graph.kind(name) == ("sse", "server") else graph.upstream_of(name, ("sse", "server"))
    for server in servers:
        retry = (graph.bindings[server].get("options") or {}).get("retry")
        if retry is not None:
            translation.origin((*here, "retry_ms"), ("bindings", server, "options", "retry"))
            return {"retry_ms": retry}
    return {}


def identity_templates(value: Any) -> Any:
    """Zilla's ``${guarded['name'].identity}`` is Sluice's ``${identity}``."""
    if isinstance(value, str):
        return GUARDED_IDENTITY.sub("${identity}", value)
    if isinstance(value, list):
        return [identity_templates(v) for v in value]
    if isinstance(value, dict):
        return {k: identity_templates(v) for k, v in value.items()}
    return value


def proxy_routes(
    translation: Translation, graph: ZillaGraph, name: str, binding: dict[str, Any], start: int, used: set[str]
) -> list[dict[str, Any]]:
    """sse server routes that exit to an sse client: proxy routes to the upstream the client chain reaches."""
    out: list[dict[str, Any]] = []
    routes = binding.get("routes") or []
    if binding.get("exit"):
        routes = [*routes, {"exit": binding["exit"]}]
    for index, route in enumerate(routes):
        at: DocPath = (
            ("bindings", name, "routes", index)
            if index < len(binding.get("routes") or [])
            else ("bindings", name, "exit")
        )
        target = route.get("exit") if isinstance(route, dict) else None
        if graph.kind(str(target)) != ("sse", "client"):
            continue  # an sse server in front of sse-kafka: that binding's routes are the routes
        used.update({name, str(target)})
        origin = upstream_origin(graph, str(target), used)
        if origin is None:
            translation.skip(at, "the sse client does not lead to an http client with a tcp host and port")
            continue
        guard, roles = route_guarded(translation, route, at)
        when_paths = [str(w["path"]) for w in route.get("when") or [] if isinstance(w, dict) and w.get("path")]
        paths = when_paths or http_paths(graph, name)
        if not paths:
            translation.skip(at, "no when.path here nor a :path in the http server routes to it")
        for path in paths:
            if "{" in path or "*" in path:
                translation.skip(at, f"path {path}: an upstream URL cannot depend on path parameters")
                continue
            here: DocPath = ("routes", start + len(out))
            item: dict[str, Any] = {"path": path, "kind": "sse-proxy", "upstream": origin + path}
            translation.origin(here, at)
            if guard is not None:
                item["guard"], item["roles"] = guard, roles
                translation.origin((*here, "guard"), (*at, "guarded"))
            cors = route_cors(graph, name)
            if cors:
                item["cors"] = cors
            item.update(sse_options(translation, graph, name, here))
            out.append(item)
    return out


def http_paths(graph: ZillaGraph, name: str) -> list[str]:
    """The ``:path`` values http server routes send to binding ``name`` (in order, once each)."""
    paths: list[str] = []
    for _, headers in graph.http_whens(name, direct=True):
        path = headers.get(":path")
        if isinstance(path, str) and path not in paths:
            paths.append(path)
    return paths


def upstream_origin(graph: ZillaGraph, sse_client: str, used: set[str]) -> str | None:
    """``http://host:port`` from sse client -> http client -> (tls client ->) tcp client."""
    http = graph.bindings[sse_client].get("exit")
    if graph.kind(str(http)) != ("http", "client"):
        return None
    scheme, tcp = "http", graph.bindings[str(http)].get("exit")
    if graph.kind(str(tcp)) == ("tls", "client"):
        used.add(str(tcp))
        scheme, tcp = "https", graph.bindings[str(tcp)].get("exit")
    if graph.kind(str(tcp)) != ("tcp", "client"):
        return None
    options = graph.bindings[str(tcp)].get("options") or {}
    host, port = options.get("host"), options.get("port")
    if isinstance(port, list):
        port = port[0] if port else None
    if not host or port is None:
        return None
    used.update({str(http), str(tcp)})
    return f"{scheme}://{host}:{port}"
