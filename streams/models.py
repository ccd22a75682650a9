"""Configuration of topics and routes, edited in the admin (and later as code)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

from streams.core.clusters import DEFAULT_CLUSTER, ClusterSpec, property_problem
from streams.core.patterns import PatternError, pattern_compile
from streams.core.reserved import ReservedEndpoints
from streams.core.templating import TemplateError, template_compile

KAFKA_TOPIC_NAME = RegexValidator(
    r"^[A-Za-z0-9._-]{1,249}$", "A Kafka topic name: letters, digits, '.', '_' and '-' (at most 249)."
)


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


def _no_control(value: str) -> None:
    if any(c in value for c in "\r\n\x00"):
        raise ValidationError("CR, LF and NUL are not allowed here.", code="control_character")


class Schema(models.Model):
    """A JSON Schema that message values must satisfy (SPEC 5): inline, or a subject in a schema registry."""

    name = models.CharField(max_length=100, unique=True, validators=[RegexValidator(r"^[A-Za-z0-9._-]+$")])
    description = models.CharField(max_length=200, blank=True)
    json_schema = models.JSONField(null=True, blank=True, help_text="Inline JSON Schema (draft 2020-12).")
    registry_url = models.URLField(blank=True, help_text="Confluent-compatible schema registry.")
    subject = models.CharField(max_length=255, blank=True, help_text="Subject in the registry.")
    version = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: the latest version.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        inline = self.json_schema is not None
        registry = bool(self.registry_url or self.subject)
        if inline == registry:
            raise ValidationError("Give either an inline JSON Schema or a registry URL with a subject.")
        if registry and not (self.registry_url and self.subject):
            raise ValidationError({"subject": "A registry schema needs both the registry URL and the subject."})
        if inline and not isinstance(self.json_schema, (dict, bool)):
            raise ValidationError({"json_schema": "A JSON Schema is an object (or true/false)."})


def validate_cluster_properties(value: object) -> None:
    """librdkafka properties: a mapping of dotted names to strings or numbers, secrets only by reference."""
    if not isinstance(value, dict):
        raise ValidationError('Give a mapping, e.g. {"security.protocol": "SASL_SSL"}.', code="properties")
    problems = [problem for name, item in value.items() if (problem := property_problem(name, item))]
    if problems:
        raise ValidationError(problems, code="properties")


class Cluster(models.Model):
    """A Kafka cluster topics live on: bootstrap servers and client properties (TLS, SASL, ...).

    Secret values are written as ``${env.NAME}`` and read from the environment when
    Sluice connects; a row never holds a secret itself. Topics without a cluster use
    the one the environment describes (``KAFKA_BOOTSTRAP_SERVERS`` and ``KAFKA_*``).
    """

    name = models.CharField(
        max_length=100,
        unique=True,
        validators=[RegexValidator(r"^[A-Za-z0-9._-]+$")],
        help_text=f"How topics name it ({DEFAULT_CLUSTER!r} is the cluster of the environment).",
    )
    description = models.CharField(max_length=200, blank=True)
    bootstrap_servers = models.CharField(
        max_length=500,
        validators=[_no_control],
        help_text="host:port[,host:port...]; ${env.NAME} is read from the environment when Sluice connects.",
    )
    properties = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_cluster_properties],
        help_text=(
            'librdkafka properties, e.g. {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", '
            '"sasl.username": "sluice", "sasl.password": "${env.KAFKA_PASSWORD}"}. Secrets only as ${env.NAME}.'
        ),
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        if self.name == DEFAULT_CLUSTER:
            raise ValidationError(
                {"name": f"{DEFAULT_CLUSTER!r} is the cluster of the environment (KAFKA_BOOTSTRAP_SERVERS, KAFKA_*)."}
            )

    def spec(self) -> ClusterSpec:
        return ClusterSpec.of(self.name, self.bootstrap_servers, self.properties or {})


class Topic(models.Model):
    """A Kafka topic Sluice serves, with the bounds of its in-memory cache (SPEC 2.5)."""

    name = models.CharField(max_length=249, unique=True, validators=[KAFKA_TOPIC_NAME])
    description = models.CharField(max_length=200, blank=True)
    cache_max_messages = models.PositiveIntegerField(
        default=10_000, validators=[MinValueValidator(1)], help_text="Records kept in memory, all partitions together."
    )
    cache_max_bytes = models.PositiveBigIntegerField(
        default=16 * 1024 * 1024, validators=[MinValueValidator(1024)], help_text="Bytes kept in memory."
    )
    cache_max_age_seconds = models.PositiveIntegerField(
        default=3600, validators=[MinValueValidator(1)], help_text="Records older than this leave the cache."
    )
    schema = models.ForeignKey(
        Schema,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="topics",
        help_text="Values that do not validate are skipped and counted.",
    )
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="topics",
        help_text="Blank: the cluster of the environment (KAFKA_BOOTSTRAP_SERVERS), or the embedded broker.",
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Route(models.Model):
    """A URL pattern answered with a stream of a Kafka topic (SPEC 2)."""

    class Kind(models.TextChoices):
        SSE_KAFKA = "sse-kafka", "SSE from Kafka"
        SSE_PROXY = "sse-proxy", "SSE proxy of an upstream SSE server"

    class EventIdForm(models.TextChoices):
        ETAG = "etag", "progress[/etag]"
        KEY = "key", '["key","progress"]'

    class Initial(models.TextChoices):
        LIVE = "live", "live: from the current end"
        EARLIEST = "earliest", "earliest: everything retained"
        SNAPSHOT = "snapshot", "snapshot: latest value per key, then live"

    class Binary(models.TextChoices):
        SKIP = "skip", "skip (count as invalid)"
        BASE64 = "base64", "send as base64"

    order = models.IntegerField(default=0, help_text="Lower first; the first matching route wins.")
    path = models.CharField(
        max_length=200,
        validators=[validate_path_pattern, validate_path_not_reserved],
        help_text=(
            "For example /events/{topic}: {name} matches one path segment, * anything. "
            "Sluice's own endpoints (/healthz, /metrics, /admin/, ...) are never routes."
        ),
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.SSE_KAFKA)
    topic = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_template],
        help_text="Topic name or template, e.g. ${params.topic} (sse-kafka routes).",
    )
    upstream = models.CharField(
        max_length=500,
        blank=True,
        validators=[validate_upstream_url],
        help_text="http(s) URL of the upstream SSE stream (sse-proxy routes).",
    )
    schema = models.ForeignKey(
        Schema,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="routes",
        help_text="Checked on top of the topic's schema; values that do not validate are skipped and counted.",
    )
    event_id = models.CharField(max_length=8, choices=EventIdForm.choices, default=EventIdForm.ETAG)
    initial = models.CharField(max_length=10, choices=Initial.choices, default=Initial.LIVE)
    allow_since = models.BooleanField(default=False, help_text="Accept ?since=<ISO-8601 or epoch ms>.")
    binary = models.CharField(
        max_length=8, choices=Binary.choices, default=Binary.SKIP, help_text="Values that are not UTF-8 text."
    )
    retry_ms = models.PositiveIntegerField(default=2000, help_text="Reconnection delay sent to browsers.")
    heartbeat_seconds = models.PositiveIntegerField(default=15, validators=[MinValueValidator(1)])
    max_pending_bytes = models.PositiveIntegerField(
        default=1024 * 1024,
        validators=[MinValueValidator(4096)],
        help_text="A client further behind than this is disconnected (it resumes from its last id).",
    )
    guard = models.ForeignKey(
        "guards.Guard",
        null=True,
        blank=True,
        on_delete=models.PROTECT,  # deleting a guard must never leave its routes open
        related_name="routes",
        help_text="JWT guard; blank: the route is public.",
    )
    roles = models.JSONField(
        default=list, blank=True, help_text='Roles the token must grant, all of them, e.g. ["read:items"].'
    )
    allow_origins = models.JSONField(
        default=list,
        blank=True,
        help_text='CORS: origins allowed to open the stream, e.g. ["https://app.example.com"] or ["*"].',
    )
    allow_credentials = models.BooleanField(
        default=False, help_text="CORS: let browsers send cookies (withCredentials); needs explicit origins."
    )
    enabled = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["order", "path"]
        constraints = [models.UniqueConstraint(fields=["path"], name="route_path_unique")]

    def __str__(self) -> str:
        return self.path

    def shadowed_endpoints(self) -> tuple[str, ...]:
        """Sluice's endpoints this (general) path could match: requests for them never reach the route."""
        try:
            return reserved_endpoints().shadowed(pattern_compile(self.path))
        except PatternError:
            return ()

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if self.roles is None:
            self.roles = []
        if not isinstance(self.roles, list) or not all(isinstance(r, str) and r for r in self.roles):
            errors["roles"] = 'Give a list of role names, e.g. ["read:items"].'
        elif self.roles and self.guard_id is None:
            errors["roles"] = "Roles need a guard."
        if self.allow_origins is None:
            self.allow_origins = []
        if not isinstance(self.allow_origins, list) or not all(
            isinstance(o, str) and (o == "*" or o.startswith(("http://", "https://"))) for o in self.allow_origins
        ):
            errors["allow_origins"] = 'Give a list of origins such as "https://app.example.com", or ["*"].'
        elif self.allow_credentials and "*" in self.allow_origins:
            errors["allow_credentials"] = "Credentials cannot be allowed for every origin (*): name the origins."
        if self.kind == self.Kind.SSE_PROXY:
            if not self.upstream:
                errors["upstream"] = "An sse-proxy route needs the upstream URL."
            if self.topic:
                errors["topic"] = "An sse-proxy route has an upstream, not a topic."
        else:
            if not self.topic:
                errors["topic"] = "An sse-kafka route needs a topic."
            if self.upstream:
                errors["upstream"] = "Only sse-proxy routes have an upstream."
        try:
            template = template_compile(self.topic)
        except TemplateError:
            template = None
        if template is not None and not template.params_only and self.guard_id is None:
            errors["topic"] = "${identity} and ${attributes.NAME} need a guard."
        if errors:
            raise ValidationError(errors)
        try:
            params = set(pattern_compile(self.path).params)
        except PatternError:
            return  # the field validator already reported it
        try:
            used = template_compile(self.topic).params
        except TemplateError:
            return
        unknown = sorted(used - params)
        if unknown:
            errors["topic"] = f"${{params.{unknown[0]}}} is not a parameter of the path {self.path}."
        if errors:
            raise ValidationError(errors)


class RouteFilter(models.Model):
    """One filter of a route: a message passes if it matches any of the route's filters."""

    route = models.ForeignKey(Route, related_name="filters", on_delete=models.CASCADE)
    key = models.CharField(
        max_length=300,
        blank=True,
        validators=[validate_template, _no_control],
        help_text="Message key (template), e.g. ${params.match}. Blank: any key.",
    )
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text='Header name to value (template), e.g. {"tag": "blue"}. All must match.',
    )

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        parts = [f"key={self.key}"] if self.key else []
        parts += [f"{k}={v}" for k, v in sorted((self.headers or {}).items())]
        return ", ".join(parts) or "any message"

    def clean(self) -> None:
        super().clean()
        if not isinstance(self.headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.headers.items()
        ):
            raise ValidationError({"headers": 'Give an object of header names to string values, e.g. {"tag": "blue"}.'})
        params = self._route_params()
        if not self._route_guarded():
            for template in self.templates():
                try:
                    if not template_compile(template).params_only:
                        raise ValidationError({"key": "${identity} and ${attributes.NAME} need a guard on the route."})
                except TemplateError:
                    pass  # reported below or by the field validator
        for name, value in self.headers.items():
            if not name or any(c in name for c in "\r\n\x00"):
                raise ValidationError({"headers": f"'{name}' is not a usable header name."})
            try:
                used = template_compile(value).params
            except TemplateError as exc:
                raise ValidationError({"headers": f"{name}: {exc}"}) from exc
            if params is not None and used - params:
                raise ValidationError({"headers": f"{name}: ${{params.{min(used - params)}}} is not a path parameter."})
        if self.key and params is not None:
            try:
                used = template_compile(self.key).params
            except TemplateError:
                return  # the field validator already reported it
            if used - params:
                raise ValidationError({"key": f"${{params.{min(used - params)}}} is not a path parameter."})

    def _route_guarded(self) -> bool:
        try:
            return self.route.guard_id is not None
        except Route.DoesNotExist:
            return True  # nothing to say until the route exists

    def _route_params(self) -> frozenset[str] | None:
        """Parameters of the route's path; None while the route or its path is not usable."""
        try:
            return frozenset(pattern_compile(self.route.path).params)
        except (Route.DoesNotExist, PatternError):
            return None

    def templates(self) -> list[str]:
        return [self.key, *self.headers.values()] if self.key else list(self.headers.values())
