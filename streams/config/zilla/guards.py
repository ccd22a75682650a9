"""Zilla ``jwt`` guards as Sluice guards, and what the http server in front says of a route: credentials, CORS."""

from __future__ import annotations

from typing import Any

from common.config.document import ConfigError, DocPath, Translation
from streams.config.zilla.graph import ZillaGraph


def guards_translate(translation: Translation, guards: Any, graph: ZillaGraph) -> list[dict[str, Any]]:
    source = translation.source
    if not isinstance(guards, dict):
        raise ConfigError([source.problem(("guards",), "guards must be a mapping of name to guard")])
    out: list[dict[str, Any]] = []
    for name, guard in guards.items():
        at: DocPath = ("guards", name)
        if not isinstance(guard, dict) or guard.get("type") != "jwt":
            translation.skip(at, f"guard type {guard.get('type') if isinstance(guard, dict) else guard!r}: only jwt")
            continue
        here: DocPath = ("guards", len(out))
        item: dict[str, Any] = {"name": name}
        translation.origin(here, at)
        translation.origin((*here, "name"), at)
        options = guard.get("options") or {}
        for key, value in options.items():
            from_path = (*at, "options", key)
            if key in ("issuer", "audience", "challenge"):
                item[key] = value
            elif key == "keys" and isinstance(value, str):
                key = "jwks_url"
                item[key] = value
            elif key == "keys":
                item[key] = value  # standard base64 n/e is made base64url by the guards section
            elif key == "identity":
                key = "identity_claim"
                item[key] = value
            else:
                translation.skip(from_path, "no Sluice equivalent")
                continue
            translation.origin((*here, key), from_path)
        credentials = guard_credentials(translation, graph, name, here)
        if credentials:
            item["credentials"] = credentials
        out.append(item)
    return out


def guard_credentials(translation: Translation, graph: ZillaGraph, guard: str, here: DocPath) -> dict[str, str]:
    """Where the http server in front reads this guard's token (options.authorization.<guard>.credentials)."""
    for name, binding in graph.bindings.items():
        authorization = (binding.get("options") or {}).get("authorization") or {}
        if not isinstance(authorization, dict) or guard not in authorization:
            continue
        at: DocPath = ("bindings", name, "options", "authorization", guard, "credentials")
        credentials = (authorization[guard] or {}).get("credentials") or {}
        out: dict[str, str] = {}
        for header, template in (credentials.get("headers") or {}).items():
            out["header"], out["header_name"] = str(template), str(header).lower()
            translation.origin((*here, "credentials", "header"), (*at, "headers", header))
        for place, key in (("query", "query"), ("cookies", "cookie")):
            for param, template in (credentials.get(place) or {}).items():
                if template != "{credentials}":
                    translation.skip((*at, place, param), "only a bare {credentials} value is supported here")
                    continue
                out[key] = str(param)
                translation.origin((*here, "credentials", key), (*at, place, param))
        return out
    return {}


def route_guarded(translation: Translation, route: dict[str, Any], at: DocPath) -> tuple[str | None, list[str]]:
    guarded = route.get("guarded")
    if not guarded:
        return None, []
    if not isinstance(guarded, dict) or len(guarded) != 1:
        raise ConfigError([translation.source.problem((*at, "guarded"), "give one guard and its roles")])
    ((name, roles),) = guarded.items()
    return str(name), list(roles or [])


def route_cors(graph: ZillaGraph, name: str) -> dict[str, Any] | None:
    """CORS of the http server(s) in front of binding ``name`` (access-control policy cross-origin)."""
    for server in graph.upstream_of(name, ("http", "server")):
        control = (graph.bindings[server].get("options") or {}).get("access-control") or {}
        if control.get("policy") != "cross-origin":
            continue
        allow = control.get("allow") or {}
        origins = allow.get("origins") or ["*"]
        return {
            "allow_origins": list(origins),
            "allow_credentials": bool(allow.get("credentials")) and "*" not in origins,
        }
    return None


def entry_guard(graph: ZillaGraph, name: str) -> tuple[str | None, list[str]]:
    """The guard an sse server route puts in front of binding ``name``, if any."""
    for server in graph.upstream_of(name, ("sse", "server")):
        for route in graph.bindings[server].get("routes") or []:
            guarded = route.get("guarded") if isinstance(route, dict) else None
            if isinstance(guarded, dict) and len(guarded) == 1 and route.get("exit") == name:
                ((guard, roles),) = guarded.items()
                return str(guard), list(roles or [])
    return None, []
