"""Kafka clusters as plain data: bootstrap servers and librdkafka properties, secrets by reference only.

A property value may name environment variables as ``${env.NAME}``; they are
read when Sluice connects, never before, so a database row, an exported file
or an API answer holds the reference and never the secret. A property whose
name marks it secret (``sasl.password``, ``ssl.key.password``,
``sasl.oauthbearer.client.secret``, an inline ``ssl.key.pem``, ...) must be
such a reference: a value written out is refused when it is saved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

ENV_REFERENCE = re.compile(r"\$\{env\.([A-Za-z_][A-Za-z0-9_]*)\}")
_SECRET_NAME = re.compile(r"password|secret|token|\.pem$|jaas|oauthbearer\.config|\.key$")
_PROPERTY_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
# Sluice sets these on every client itself: a cluster cannot change them.
OWN_PROPERTIES = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "enable.partition.eof",
        "auto.offset.reset",
    }
)
DEFAULT_CLUSTER = "default"


class ClusterError(ValueError):
    """A cluster that cannot be connected to as written; the message never holds a secret value."""


def property_secret(name: str) -> bool:
    """Whether the librdkafka property ``name`` holds a secret (its value must be an ``${env.NAME}`` reference)."""
    return bool(_SECRET_NAME.search(name))


def property_problem(name: str, value: object) -> str | None:
    """Why ``name: value`` cannot be a cluster property, or None."""
    if not isinstance(name, str) or not _PROPERTY_NAME.match(name):
        return f"{name!r} is not a librdkafka property name (lower case, dotted: security.protocol)"
    if name in OWN_PROPERTIES:
        return f"{name} is set by Sluice itself" + (
            " (give it as the cluster's bootstrap servers)" if name == "bootstrap.servers" else ""
        )
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return f"{name}: give a string or a number"
    if property_secret(name) and not (isinstance(value, str) and ENV_REFERENCE.fullmatch(value.strip())):
        return f"{name} is a secret: write it as ${{env.NAME}} and set NAME in Sluice's environment"
    return None


def client_settings(client: str | Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings from a cluster's (resolved) settings, or from bootstrap servers alone."""
    return {"bootstrap.servers": client} if isinstance(client, str) else dict(client)


def env_expand(text: str, environ: Mapping[str, str], *, what: str) -> str:
    """``text`` with each ``${env.NAME}`` replaced; :class:`ClusterError` naming the variable if one is unset."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ClusterError(f"{what} names ${{env.{name}}}, but {name} is not set in Sluice's environment")
        return environ[name]

    return ENV_REFERENCE.sub(value, text)


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """One cluster as written in the configuration (references unresolved)."""

    name: str
    bootstrap: str
    properties: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, bootstrap: str, properties: Mapping[str, object] | None = None) -> ClusterSpec:
        items = tuple(sorted((str(key), str(value)) for key, value in (properties or {}).items()))
        return cls(name, bootstrap, items)

    def client_config(self, environ: Mapping[str, str]) -> dict[str, str]:
        """librdkafka settings with references resolved from ``environ`` (read now, at connect time)."""
        config = {"bootstrap.servers": env_expand(self.bootstrap, environ, what=f"cluster {self.name} bootstrap")}
        for key, value in self.properties:
            config[key] = env_expand(value, environ, what=f"cluster {self.name} property {key}")
        return config

    def redacted(self) -> dict[str, str]:
        """The properties as they may be shown or logged: secret ones as their reference (or ``***``)."""
        return {
            key: value if not property_secret(key) or ENV_REFERENCE.fullmatch(value) else "***"
            for key, value in self.properties
        }


# KAFKA_* variables that are not client properties: the bootstrap servers have their own setting.
_NOT_PROPERTIES = frozenset({"KAFKA_BOOTSTRAP_SERVERS"})


def environment_properties(environ: Mapping[str, str], prefix: str = "KAFKA_") -> dict[str, str]:
    """The client properties ``KAFKA_<NAME>`` variables give, each as a reference to its variable.

    ``KAFKA_SECURITY_PROTOCOL=SSL`` is ``security.protocol``, as in the common Kafka
    container images: the name lower-cased, ``_`` turned into ``.``. The values stay
    ``${env.KAFKA_...}`` references, read when Sluice connects, so no setting ever
    holds a secret.
    """
    return {
        name[len(prefix) :].lower().replace("_", "."): f"${{env.{name}}}"
        for name in sorted(environ)
        if name.startswith(prefix) and name not in _NOT_PROPERTIES and len(name) > len(prefix)
    }
