"""Routes and their filters: which requests stream which topic (or upstream), and how."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from common.models import Timestamped
from streams.core.patterns import PatternError, pattern_compile
from streams.core.templating import TemplateError, template_compile
from streams.core.where import WhereError, where_template
from streams.models.kafka import Schema
from streams.models.validators import (
    no_control,
    reserved_endpoints,
    validate_origins,
    validate_path_not_reserved,
    validate_path_pattern,
    validate_roles,
    validate_template,
    validate_upstream_url,
)


class Route(Timestamped):
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

    class Conflate(models.TextChoices):
        OFF = "", "off: every record (lossless)"
        KEY = "key", "by key: the latest record of each key a stream missed"

    path = models.CharField(
        max_length=200,
        validators=[validate_path_pattern, validate_path_not_reserved],
        help_text=(
            "For example /events/{topic}: {name} matches one path segment, * anything. "
            "Sluice's own endpoints (/healthz, /metrics, /admin/, ...) are never routes."
        ),
    )
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.SSE_KAFKA)
    order = models.IntegerField(default=0, help_text="Lower first; the first matching route wins.")
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
    where = models.TextField(
        blank=True,
        help_text=(
            'Only records this expression holds for, e.g. value.score.home > 3 and value.league == "${params.league}" '
            "(sse-kafka routes; docs/filters.md)."
        ),
    )
    client_filter = models.BooleanField(
        default=False,
        help_text="Accept ?where= from clients, ANDed with the route's filters: it can only narrow what they allow.",
    )
    compression = models.BooleanField(
        default=False, help_text="Compress streams (Brotli or gzip, flushed per event) for clients that accept it."
    )
    compression_min_bytes = models.PositiveIntegerField(
        default=0,
        blank=True,  # a form that leaves it out keeps the default
        help_text="Send plain when the route's events average fewer bytes than this (0: always compress).",
    )
    conflate = models.CharField(
        max_length=8,
        choices=Conflate.choices,
        default=Conflate.OFF,
        blank=True,
        help_text=(
            "by key: a stream that falls behind (a slow client, or the rate) gets only the latest record of each key "
            "it missed, and is never cut for being slow (sse-kafka routes; docs/filters.md)."
        ),
    )
    conflate_max_rate = models.PositiveIntegerField(
        default=0,
        blank=True,  # a form that leaves it out keeps the default
        validators=[MaxValueValidator(1000)],
        help_text=(
            "Conflated streams: the most writes a second, each with the latest record of every key that changed, "
            "so at most this many events per key a second (0: no cap, conflated only when the client falls behind)."
        ),
    )
    enabled = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)

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

    def where_check(self, errors: dict[str, str]) -> None:
        """Add what is wrong with ``where`` and ``client_filter`` to ``errors`` (with the position in it)."""
        if self.kind == self.Kind.SSE_PROXY and (self.where.strip() or self.client_filter):
            errors["where" if self.where.strip() else "client_filter"] = "Only sse-kafka routes filter records."
            return
        if not self.where.strip():
            return
        try:
            template = where_template(self.where)
        except WhereError as exc:
            errors["where"] = f"{exc.message} at position {exc.position}." if exc.position else f"{exc.message}."
            return
        if not template.params_only and self.guard_id is None:
            errors["where"] = "${identity} and ${claims.NAME} need a guard."

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if self.roles is None:
            self.roles = []
        try:
            validate_roles(self.roles)
        except ValidationError as exc:
            errors["roles"] = exc.messages[0]
        else:
            if self.roles and self.guard_id is None:
                errors["roles"] = "Roles need a guard."
        if self.allow_origins is None:
            self.allow_origins = []
        try:
            validate_origins(self.allow_origins)
        except ValidationError as exc:
            errors["allow_origins"] = exc.messages[0]
        else:
            if self.allow_credentials and "*" in self.allow_origins:
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
        self.where_check(errors)
        if self.conflate and self.kind == self.Kind.SSE_PROXY:
            errors["conflate"] = "Only sse-kafka routes conflate records."
        elif self.conflate_max_rate and not self.conflate:
            errors["conflate_max_rate"] = "A rate needs conflation: set conflate to key."
        if errors:
            raise ValidationError(errors)
        try:
            params = set(pattern_compile(self.path).params)
        except PatternError:
            return  # the field validator already reported it
        where_params = where_template(self.where).params if self.where.strip() else frozenset()
        if where_params - params:
            errors["where"] = f"${{params.{min(where_params - params)}}} is not a parameter of the path {self.path}."
        try:
            used = template_compile(self.topic).params
        except TemplateError:
            used = frozenset()
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
        validators=[validate_template, no_control],
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
