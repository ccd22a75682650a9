"""Validators of the configuration models' fields (each raises ``ValidationError`` with a code).

Migrations name them through the package (``streams.models.validate_...``), which re-exports them.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from common.origins import origins_problem
from streams.core.clusters import property_problem
from streams.core.formats.spec import registry_problem
from streams.core.patterns import PatternError, pattern_compile
from streams.core.reserved import ReservedEndpoints
from streams.core.templating import TemplateError, template_compile

KAFKA_TOPIC_NAME: RegexValidator = RegexValidator(
    r"^[A-Za-z0-9._-]{1,249}$", "A Kafka topic name: letters, digits, '.', '_' and '-' (at most 249)."
)


_TOPIC_CONFIG_NAME = re.compile(r"^[a-z][a-z0-9]*(\.[a-z0-9]+)*$")


def validate_topic_configs(value: object) -> None:
    """Topic configs Kafka is given when Sluice creates the topic: ``{"retention.ms": 604800000, ...}``."""
    if not isinstance(value, dict):
        raise ValidationError('Give the topic configs as an object, e.g. {"retention.ms": 604800000}.', code="configs")
    for name, setting in value.items():
        if not _TOPIC_CONFIG_NAME.match(name):
            raise ValidationError(f"{name!r} is not a Kafka topic config name (e.g. cleanup.policy).", code="configs")
        if isinstance(setting, bool) or not isinstance(setting, (str, int, float)):
            raise ValidationError(f"{name}: give a string or a number.", code="configs")


def validate_path_pattern(value: str) -> None:
    try:
        pattern_compile(value)
    except PatternError as exc:
        raise ValidationError(str(exc), code="path_pattern") from exc


def reserved_endpoints() -> ReservedEndpoints:
    """Sluice's own endpoints in this deployment (the static files' prefix comes from ``STATIC_URL``)."""
    return ReservedEndpoints.with_static(str(settings.STATIC_URL or ""))


def validate_path_not_reserved(value: str) -> None:
    """Refuse a path whose literal first segment takes one of Sluice's own endpoints."""
    try:
        pattern = pattern_compile(value)
    except PatternError:
        return  # validate_path_pattern reports it
    endpoint = reserved_endpoints().conflict(pattern)
    if endpoint is not None:
        raise ValidationError(
            f"The route {value} would take Sluice's own endpoint {endpoint}, which always answers first: "
            "choose another path.",
            code="path_reserved",
        )


def validate_registry(value: str) -> None:
    problem = registry_problem(value)
    if problem is not None:
        raise ValidationError(problem, code="registry")


def validate_template(value: str) -> None:
    try:
        template_compile(value)
    except TemplateError as exc:
        raise ValidationError(str(exc), code="template") from exc


_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\Z")


def validate_upstream_url(value: str) -> None:
    """An http(s) URL; unlike URLField, a single-label host (``sse-server`` in a compose network) is fine."""
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number in range)
    except ValueError as exc:
        raise ValidationError("The port is not a number from 0 to 65535.", code="upstream") from exc
    host = parts.hostname or ""
    ip_literal = host.startswith("[") or ":" in host
    if (
        parts.scheme not in ("http", "https")
        or not host
        or not (ip_literal or _HOST.match(host))
        or any(c.isspace() for c in value)
    ):
        raise ValidationError("Give an http:// or https:// URL with a host.", code="upstream")


def validate_origins(value: object) -> None:
    """CORS origins: a list of ``scheme://host[:port]`` (no path, no trailing slash), or ``["*"]``."""
    problem = origins_problem(value)
    if problem is not None:
        raise ValidationError(problem[0].upper() + problem[1:] + ".", code="origins")


def validate_roles(value: object) -> None:
    """Role names a token must grant: a list of names without spaces."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(r, str) and r for r in value):
        raise ValidationError('Give a list of role names, e.g. ["read:items"].', code="roles")
    spaced = [role for role in value if any(c.isspace() for c in role)]
    if spaced:
        raise ValidationError(f"{spaced[0]!r}: a role name has no spaces (one role per line).", code="roles")


def no_control(value: str) -> None:
    if any(c in value for c in "\r\n\x00"):
        raise ValidationError("CR, LF and NUL are not allowed here.", code="control_character")


def validate_cluster_properties(value: object) -> None:
    """librdkafka properties: a mapping of dotted names to strings or numbers, secrets only by reference."""
    if not isinstance(value, dict):
        raise ValidationError('Give a mapping, e.g. {"security.protocol": "SASL_SSL"}.', code="properties")
    problems = [problem for name, item in value.items() if (problem := property_problem(name, item))]
    if problems:
        raise ValidationError(problems, code="properties")
