"""Zilla ``kafka`` bindings as Sluice clusters and topics: bootstrap topics, servers, SASL and TLS."""

from __future__ import annotations

import re
from typing import Any

from common.config.document import DocPath, Translation
from streams.config.zilla.graph import ZillaGraph, binding_exits
from streams.core.clusters import ENV_REFERENCE


def bootstrap_topics(
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


ZILLA_ENV = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


SASL_MECHANISMS = {"plain": "PLAIN", "scram-sha-256": "SCRAM-SHA-256", "scram-sha-512": "SCRAM-SHA-512"}


def kafka_cluster(
    translation: Translation, graph: ZillaGraph, name: str, binding: dict[str, Any], start: int
) -> dict[str, Any]:
    """A ``kafka`` client binding as a cluster: its servers, SASL options, and TLS if a tls client follows."""
    at: DocPath = ("bindings", name)
    options = binding.get("options") or {}
    here: DocPath = ("clusters", start)
    translation.origin(here, at)
    translation.origin((*here, "bootstrap_servers"), (*at, "options", "servers"))
    properties: dict[str, str] = {}
    tls = any(graph.kind(str(exit_)) == ("tls", "client") for exit_ in binding_exits(binding))
    sasl = options.get("sasl")
    if isinstance(sasl, dict):
        mechanism = str(sasl.get("mechanism", "")).lower()
        if mechanism in SASL_MECHANISMS:
            properties["sasl.mechanism"] = SASL_MECHANISMS[mechanism]
            properties["sasl.username"] = zilla_env(str(sasl.get("username", "")))
            password = zilla_env(str(sasl.get("password", "")))
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


def zilla_env(value: str) -> str:
    """Zilla's ``${{env.NAME}}`` is Sluice's ``${env.NAME}``."""
    return ZILLA_ENV.sub(lambda m: f"${{env.{m.group(1)}}}", value)
