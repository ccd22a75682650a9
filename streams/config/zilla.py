"""Import of a Zilla ``zilla.yaml``: its ``sse-kafka`` routes, ``sse`` proxy routes and ``jwt`` guards.

Zilla describes a gateway as a graph of bindings (tcp -> tls -> http -> sse ->
sse-kafka -> kafka ...). Sluice is the whole graph in one process, so the
translation walks the graph to find what reaches each route: the http server
in front gives the request path, credentials and CORS policy; the sse server
route gives the guard and roles; an sse client chain gives the upstream URL.
Everything else (listeners, TLS, vaults, filesystems, telemetry, Kafka
connection settings) is reported as skipped with its YAML path.

Path patterns carry over as they are: Zilla's ``when.path`` ``/{topic}`` and
``${params.topic}`` in ``with`` are Sluice's pattern and template syntax.
"""

from __future__ import annotations

import re
from typing import Any

from common.config.document import ConfigError, DocPath, Document, Translation, path_text
from streams.core.clusters import ENV_REFERENCE
from streams.core.patterns import PatternError, pattern_compile

EVENT_ID_FORMS = {"${etag}": "etag", '["${base64(key)}","${etag}"]': "key"}
_GUARDED_IDENTITY = re.compile(r"\$\{guarded\['[^']*'\]\.identity\}")
_SKIP_REASONS = {
    ("tcp", "server"): "listeners: runstreams --host/--port (and --workers) serve every route",
    ("tls", "server"): "TLS: runstreams --tls-cert/--tls-key",
    ("http", "server"): "only its paths, credentials and CORS policy for the imported routes are used",
    ("http-filesystem", "proxy"): "Sluice does not serve files",
    ("filesystem", "server"): "Sluice does not serve files",
    ("kafka", "cache_client"): "Sluice keeps its own per-topic cache (topics: cache)",
    ("kafka", "cache_server"): "Sluice keeps its own per-topic cache; bootstrap topics are imported as topics",
    ("kafka", "client"): "no servers: the Kafka connection comes from KAFKA_BOOTSTRAP_SERVERS",
    ("tcp", "client"): "connections to Kafka: the cluster's bootstrap servers",
    ("tls", "client"): "TLS to Kafka: the cluster's security.protocol (and ssl.* properties for a private CA)",
}
_TOP_LEVEL_SKIP = {
    "vaults": "TLS keys and certificates: runstreams --tls-cert/--tls-key",
    "telemetry": "metrics: GET /metrics (Prometheus); logs: Django logging",
    "catalogs": "schemas: the schemas section (inline JSON Schema or a registry subject)",
}


def _exits(binding: dict[str, Any]) -> list[str]:
    out = [binding["exit"]] if isinstance(binding.get("exit"), str) else []
    for route in binding.get("routes") or []:
        if isinstance(route, dict) and isinstance(route.get("exit"), str):
            out.append(route["exit"])
    return out


class ZillaGraph:
    """The bindings of a zilla.yaml and who exits to whom."""

    def __init__(self, bindings: dict[str, Any]) -> None:
        self.bindings = {name: b for name, b in bindings.items() if isinstance(b, dict)}
        self.entries: dict[str, list[str]] = {name: [] for name in self.bindings}
        for name, binding in self.bindings.items():
            for exit_name in _exits(binding):
                self.entries.setdefault(exit_name, []).append(name)

    def kind(self, name: str) -> tuple[str, str]:
        binding = self.bindings.get(name, {})
        return str(binding.get("type", "")), str(binding.get("kind", ""))

    def leads_to(self, start: str, target: str) -> bool:
        """Whether requests entering binding ``start`` reach ``target`` (any number of hops)."""
        return start == target or start in self.upstream_of(target, self.kind(start))

    def upstream_of(self, name: str, kind: tuple[str, str]) -> list[str]:
        """Bindings of ``kind`` from which requests reach ``name`` (any number of hops)."""
        seen, todo, found = {name}, [name], []
        while todo:
            for entry in self.entries.get(todo.pop(), []):
                if entry in seen:
                    continue
                seen.add(entry)
                todo.append(entry)
                if self.kind(entry) == kind:
                    found.append(entry)
        return found


def zilla_translate(source: Document) -> Translation:
    """The guards and routes of a zilla.yaml as a Sluice document; what cannot be mapped is in ``skipped``."""
    translation = Translation(source)
    data = source.data
    out = translation.document.data
    problems = []
    bindings = data.get("bindings") or {}
    if not isinstance(bindings, dict):
        raise ConfigError([source.problem(("bindings",), "bindings must be a mapping of name to binding")])
    graph = ZillaGraph(bindings)
    for key in data:
        if key in _TOP_LEVEL_SKIP:
            translation.skip((key,), _TOP_LEVEL_SKIP[key])
        elif key == "name":
            translation.skip((key,), "namespace: a Sluice database is one namespace")
        elif key not in ("bindings", "guards"):
            translation.skip((key,), "no Sluice equivalent")
    guards = _guards(translation, data.get("guards") or {}, graph)
    if guards:
        out["guards"] = guards
    routes: list[dict[str, Any]] = []
    topics: list[dict[str, Any]] = []
    clusters: list[dict[str, Any]] = []
    used: set[str] = set()
    for name, binding in graph.bindings.items():
        kind = graph.kind(name)
        try:
            if kind == ("sse-kafka", "proxy"):
                routes += _kafka_routes(translation, graph, name, binding, len(routes))
                used.add(name)
            elif kind == ("sse", "server"):
                routes += _proxy_routes(translation, graph, name, binding, len(routes), used)
            elif kind == ("kafka", "cache_server"):
                topics += _bootstrap_topics(translation, graph, name, binding, len(topics))
            elif kind == ("kafka", "client") and (binding.get("options") or {}).get("servers"):
                clusters.append(_kafka_cluster(translation, graph, name, binding, len(clusters)))
                used.add(name)
        except ConfigError as exc:
            problems += exc.problems
    for name in graph.bindings:
        if name in used:
            continue
        kind = graph.kind(name)
        if kind == ("sse", "server"):
            continue  # its routes were imported above (or skipped one by one)
        translation.skip(("bindings", name), _SKIP_REASONS.get(kind, f"{kind[0]} {kind[1]}: no Sluice equivalent"))
    if problems:
        raise ConfigError(problems)
    if clusters:
        out["clusters"] = clusters
    if topics:
        out["topics"] = topics
    if routes:
        out["routes"] = routes
    return translation


def _guards(translation: Translation, guards: Any, graph: ZillaGraph) -> list[dict[str, Any]]:
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
        credentials = _credentials(translation, graph, name, here)
        if credentials:
            item["credentials"] = credentials
        out.append(item)
    return out


def _credentials(translation: Translation, graph: ZillaGraph, guard: str, here: DocPath) -> dict[str, str]:
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


def _guarded(translation: Translation, route: dict[str, Any], at: DocPath) -> tuple[str | None, list[str]]:
    guarded = route.get("guarded")
    if not guarded:
        return None, []
    if not isinstance(guarded, dict) or len(guarded) != 1:
        raise ConfigError([translation.source.problem((*at, "guarded"), "give one guard and its roles")])
    ((name, roles),) = guarded.items()
    return str(name), list(roles or [])


def _cors(graph: ZillaGraph, name: str) -> dict[str, Any] | None:
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


def _entry_guard(graph: ZillaGraph, name: str) -> tuple[str | None, list[str]]:
    """The guard an sse server route puts in front of binding ``name``, if any."""
    for server in graph.upstream_of(name, ("sse", "server")):
        for route in graph.bindings[server].get("routes") or []:
            guarded = route.get("guarded") if isinstance(route, dict) else None
            if isinstance(guarded, dict) and len(guarded) == 1 and route.get("exit") == name:
                ((guard, roles),) = guarded.items()
                return str(guard), list(roles or [])
    return None, []


def _kafka_routes(
    translation: Translation, graph: ZillaGraph, name: str, binding: dict[str, Any], start: int
) -> list[dict[str, Any]]:
    source = translation.source
    out: list[dict[str, Any]] = []
    for index, route in enumerate(binding.get("routes") or []):
        at: DocPath = ("bindings", name, "routes", index)
        if not isinstance(route, dict):
            raise ConfigError([source.problem(at, "a route is a mapping")])
        guard, roles = _guarded(translation, route, at)
        if guard is None:
            guard, roles = _entry_guard(graph, name)
        with_ = route.get("with") or {}
        for key in with_:
            if key not in ("topic", "filters", "event"):
                translation.skip((*at, "with", key), "no Sluice equivalent")
        paths = [(w.get("path"), (*at, "when", i, "path")) for i, w in enumerate(route.get("when") or [])]
        if not paths:
            translation.skip(at, "a route without when.path: every Sluice route has a path")
        served = _http_conditions(translation, graph, name)
        for path, path_at in paths:
            if not isinstance(path, str):
                translation.skip(path_at[:-1], "only path conditions are imported")
                continue
            for served_path, served_at, params in _served_paths(translation, path, path_at, served):
                here: DocPath = ("routes", start + len(out))
                topic = _params_fill(with_.get("topic", ""), params)
                item: dict[str, Any] = {"path": served_path, "kind": "sse-kafka", "topic": topic}
                translation.origin(here, at)
                translation.origin((*here, "path"), served_at)
                translation.origin((*here, "topic"), (*at, "with", "topic"))
                if with_.get("filters"):
                    item["filters"] = _params_fill(_identity_templates(with_["filters"]), params)
                    translation.origin((*here, "filters"), (*at, "with", "filters"))
                out.append(_kafka_route_options(translation, graph, name, at, here, with_, item, guard, roles))
    return out


def _kafka_route_options(
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
    cors = _cors(graph, name)
    if cors:
        item["cors"] = cors
    item.update(_sse_options(translation, graph, name, here))
    return item


def _sse_options(translation: Translation, graph: ZillaGraph, name: str, here: DocPath) -> dict[str, Any]:
    """``retry`` of the sse server in front of binding ``name`` (or of ``name`` itself) as ``retry_ms``."""
    servers = [name] if graph.kind(name) == ("sse", "server") else graph.upstream_of(name, ("sse", "server"))
    for server in servers:
        retry = (graph.bindings[server].get("options") or {}).get("retry")
        if retry is not None:
            translation.origin((*here, "retry_ms"), ("bindings", server, "options", "retry"))
            return {"retry_ms": retry}
    return {}


def _identity_templates(value: Any) -> Any:
    """Zilla's ``${guarded['name'].identity}`` is Sluice's ``${identity}``."""
    if isinstance(value, str):
        return _GUARDED_IDENTITY.sub("${identity}", value)
    if isinstance(value, list):
        return [_identity_templates(v) for v in value]
    if isinstance(value, dict):
        return {k: _identity_templates(v) for k, v in value.items()}
    return value


def _proxy_routes(
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
        origin = _upstream_origin(graph, str(target), used)
        if origin is None:
            translation.skip(at, "the sse client does not lead to an http client with a tcp host and port")
            continue
        guard, roles = _guarded(translation, route, at)
        when_paths = [str(w["path"]) for w in route.get("when") or [] if isinstance(w, dict) and w.get("path")]
        paths = when_paths or _http_paths(graph, name)
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
            cors = _cors(graph, name)
            if cors:
                item["cors"] = cors
            item.update(_sse_options(translation, graph, name, here))
            out.append(item)
    return out


# http route conditions Sluice routes cannot hold: Sluice serves every host, scheme and port it listens on.
_CONDITION_SKIPS = {
    ":authority": "Sluice routes match paths only: every host name reaches them",
    ":scheme": "Sluice routes match paths only: http and https both reach them",
}
_STREAM_METHODS = ("GET", "HEAD")
_PARAM = re.compile(r"\$\{params\.([A-Za-z_][A-Za-z0-9_]*)\}")


def _http_conditions(translation: Translation, graph: ZillaGraph, name: str) -> list[tuple[str, DocPath]] | None:
    """The ``:path`` values the http servers in front send on to ``name``, with their YAML paths.

    None when some http route reaches ``name`` without a ``:path`` condition (every path does). A
    ``when`` for a method a stream does not answer is left out; ``:authority``, ``:scheme`` and
    other headers are reported as skipped.
    """
    paths: list[tuple[str, DocPath]] = []
    every_path = not graph.upstream_of(name, ("http", "server"))
    for server in graph.upstream_of(name, ("http", "server")):
        for index, route in enumerate(graph.bindings[server].get("routes") or []):
            if not isinstance(route, dict) or not graph.leads_to(str(route.get("exit")), name):
                continue
            at: DocPath = ("bindings", server, "routes", index)
            whens = route.get("when") or [{}]
            for number, when in enumerate(whens):
                headers = (when.get("headers") or {}) if isinstance(when, dict) else {}
                when_at: DocPath = (*at, "when", number, "headers")
                for header in headers:
                    if header not in (":path", ":method"):
                        reason = _CONDITION_SKIPS.get(header, "Sluice routes match paths only")
                        _skip_once(translation, (*when_at, header), reason)
                method = headers.get(":method")
                if isinstance(method, str) and method.upper() not in _STREAM_METHODS:
                    _skip_once(translation, (*when_at, ":method"), f"streams answer GET: {method} is not served")
                    continue
                path = headers.get(":path")
                if not isinstance(path, str):
                    every_path = True
                elif all(path != known for known, _ in paths):
                    paths.append((path, (*when_at, ":path")))
    return None if every_path else paths


def _served_paths(
    translation: Translation, path: str, path_at: DocPath, served: list[tuple[str, DocPath]] | None
) -> list[tuple[str, DocPath, dict[str, str]]]:
    """The route paths to import for an sse-kafka ``path``, given the ``:path`` values the http server sends.

    A literal ``:path`` the pattern matches becomes a route of its own, its parameters filled in
    (``/{topic}`` behind ``:path: /events`` serves ``/events``, topic ``events``).
    """
    if served is None:
        return [(path, path_at, {})]
    try:
        pattern = pattern_compile(path)
    except PatternError:
        return [(path, path_at, {})]  # the route's own validation names the problem, at this line
    out: list[tuple[str, DocPath, dict[str, str]]] = []
    for served_path, served_at in served:
        if served_path == path:
            out.append((path, path_at, {}))
            continue
        params = pattern.match(served_path) if "{" not in served_path and "*" not in served_path else None
        if params is None:
            _skip_once(translation, served_at, f"{served_path} does not reach the sse-kafka route {path}")
            continue
        out.append((served_path, served_at, params))
    if not out:
        translation.skip(path_at, "no path the http server sends on reaches this route")
    return out


def _params_fill(value: Any, params: dict[str, str]) -> Any:
    """``${params.NAME}`` replaced by the value the served path gives it, in strings, lists and mappings."""
    if not params:
        return value
    if isinstance(value, str):
        return _PARAM.sub(lambda m: params.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_params_fill(v, params) for v in value]
    if isinstance(value, dict):
        return {k: _params_fill(v, params) for k, v in value.items()}
    return value


def _skip_once(translation: Translation, at: DocPath, reason: str) -> None:
    if all(where != path_text(at) for where, _ in translation.skipped):
        translation.skip(at, reason)


def _http_paths(graph: ZillaGraph, name: str) -> list[str]:
    """The ``:path`` values http server routes send to binding ``name`` (in order, once each)."""
    paths: list[str] = []
    for server in graph.upstream_of(name, ("http", "server")):
        for route in graph.bindings[server].get("routes") or []:
            if not isinstance(route, dict) or route.get("exit") != name:
                continue
            for when in route.get("when") or []:
                path = ((when or {}).get("headers") or {}).get(":path")
                if isinstance(path, str) and path not in paths:
                    paths.append(path)
    return paths


def _upstream_origin(graph: ZillaGraph, sse_client: str, used: set[str]) -> str | None:
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


def _bootstrap_topics(
    translation: Translation, graph: ZillaGraph, name: str, binding: dict[str, Any], start: int
) -> list[dict[str, Any]]:
    """The cache server's bootstrap topics, on the cluster of the kafka client it leads to (if that has servers)."""
    out: list[dict[str, Any]] = []
    cluster = next(
        (
            client
            for client, other in graph.bindings.items()
            if graph.kind(client) == ("kafka", "client")
            and (other.get("options") or {}).get("servers")
            and graph.leads_to(name, client)
        ),
        None,
    )
    for index, topic in enumerate((binding.get("options") or {}).get("bootstrap") or []):
        here: DocPath = ("topics", start + len(out))
        translation.origin(here, ("bindings", name, "options", "bootstrap", index))
        out.append({"name": str(topic), "cluster": cluster} if cluster else {"name": str(topic)})
    return out


_ZILLA_ENV = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_SASL_MECHANISMS = {"plain": "PLAIN", "scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512"}


def _kafka_cluster(
    translation: Translation, graph: ZillaGraph, name: str, binding: dict[str, Any], start: int
) -> dict[str, Any]:
    """A ``kafka`` client binding as a cluster: its servers, SASL options, and TLS if a tls client follows."""
    at: DocPath = ("bindings", name)
    options = binding.get("options") or {}
    here: DocPath = ("clusters", start)
    translation.origin(here, at)
    translation.origin((*here, "bootstrap_servers"), (*at, "options", "servers"))
    properties: dict[str, str] = {}
    tls = any(graph.kind(str(exit_)) == ("tls", "client") for exit_ in _exits(binding))
    sasl = options.get("sasl")
    if isinstance(sasl, dict):
        mechanism = str(sasl.get("mechanism", "")).lower()
        if mechanism in _SASL_MECHANISMS:
            properties["sasl.mechanism"] = _SASL_MECHANISMS[mechanism]
            properties["sasl.username"] = _zilla_env(str(sasl.get("username", "")))
            password = _zilla_env(str(sasl.get("password", "")))
            if not ENV_REFERENCE.fullmatch(password):
                variable = re.sub(r"[^A-Z0-9]+", "_", name.upper()) + "_SASL_PASSWORD"
                translation.skip(
                    (*at, "options", "sasl", "password"),
                    f"a password written out is not imported: set {variable} in Sluice's environment",
                )
                password = f"${{env.{variable}}}"
            properties["sasl.password"] = password
        else:
            translation.skip((*at, "options", "sasl", "mechanism"), f"SASL mechanism {mechanism!r} is not supported")
        properties["security.protocol"] = "SASL_SSL" if tls else "SASL_PLAINTEXT"
    elif tls:
        properties["security.protocol"] = "SSL"
    servers = options.get("servers") or []
    item: dict[str, Any] = {"name": name, "bootstrap_servers": ",".join(str(server) for server in servers)}
    if properties:
        item["properties"] = properties
        translation.origin((*here, "properties"), (*at, "options"))
    return item


def _zilla_env(value: str) -> str:
    """Zilla's ``${{env.NAME}}`` is Sluice's ``${env.NAME}``."""
    return _ZILLA_ENV.sub(lambda m: f"${{env.{m.group(1)}}}", value)
