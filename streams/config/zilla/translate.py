"""A zilla.yaml translated to Sluice's sections: each binding mapped, or reported as skipped with its path."""

from __future__ import annotations

from typing import Any

from common.config.document import ConfigError, Document, Translation
from streams.config.zilla.graph import ZillaGraph
from streams.config.zilla.guards import guards_translate
from streams.config.zilla.kafka import bootstrap_topics, kafka_cluster
from streams.config.zilla.models import catalogs_named, topic_formats
from streams.config.zilla.routes import kafka_routes, proxy_routes

SKIP_REASONS = {
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


TOP_LEVEL_SKIP = {
    "vaults": "TLS keys and certificates: runstreams --tls-cert/--tls-key",
    "telemetry": "metrics: GET /metrics (Prometheus); logs: Django logging",
}


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
    catalogs = data.get("catalogs") or {}
    for key in data:
        if key == "catalogs" and isinstance(catalogs, dict):
            named = catalogs_named(bindings)
            for catalog in catalogs:
                if catalog not in named:
                    translation.skip((key, catalog), "not named by any kafka topic's model")
            continue  # the others are read where kafka topics name them
        if key in TOP_LEVEL_SKIP:
            translation.skip((key,), TOP_LEVEL_SKIP[key])
        elif key == "name":
            translation.skip((key,), "namespace: a Sluice database is one namespace")
        elif key not in ("bindings", "guards"):
            translation.skip((key,), "no Sluice equivalent")
    guards = guards_translate(translation, data.get("guards") or {}, graph)
    if guards:
        out["guards"] = guards
    routes: list[dict[str, Any]] = []
    topics: list[dict[str, Any]] = []
    clusters: list[dict[str, Any]] = []
    used: set[str] = set()
    formats: dict[str, dict[str, Any]] = {}
    for name, binding in graph.bindings.items():
        kind = graph.kind(name)
        if kind[0] == "kafka":
            formats.update(topic_formats(translation, catalogs if isinstance(catalogs, dict) else {}, name, binding))
        try:
            if kind == ("sse-kafka", "proxy"):
                routes += kafka_routes(translation, graph, name, binding, len(routes))
                used.add(name)
            elif kind == ("sse", "server"):
                routes += proxy_routes(translation, graph, name, binding, len(routes), used)
            elif kind == ("kafka", "cache_server"):
                topics += bootstrap_topics(translation, graph, name, binding, len(topics))
            elif kind == ("kafka", "client") and (binding.get("options") or {}).get("servers"):
                clusters.append(kafka_cluster(translation, graph, name, binding, len(clusters)))
                used.add(name)
        except ConfigError as exc:
            problems += exc.problems
    for name in graph.bindings:
        if name in used:
            continue
        kind = graph.kind(name)
        if kind == ("sse", "server"):
            continue  # its routes were imported above (or skipped one by one)
        translation.skip(("bindings", name), SKIP_REASONS.get(kind, f"{kind[0]} {kind[1]}: no Sluice equivalent"))
    if problems:
        raise ConfigError(problems)
    topics_with_formats(topics, formats)
    if clusters:
        out["clusters"] = clusters
    if topics:
        out["topics"] = topics
    if routes:
        out["routes"] = routes
    return translation


def topics_with_formats(topics: list[dict[str, Any]], formats: dict[str, dict[str, Any]]) -> None:
    """Give the imported topics their formats; a topic with a format that no cache bootstraps is added."""
    named = {topic["name"]: topic for topic in topics}
    for name, fields in formats.items():
        topic = named.get(name)
        if topic is None:
            topic = {"name": name}
            topics.append(topic)
        for key, value in fields.items():
            part, _, field = key.partition(".")
            if field:
                topic.setdefault(part, {})[field] = value
            else:
                topic[part] = value
