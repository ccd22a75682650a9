"""Admin pages for topics and routes: searchable, filterable, validated on the form.

The topic and route lists show each topic's state in Kafka, read once per cluster
per page within a couple of seconds (:mod:`streams.topics`): a cluster that does
not answer shows "unknown", and the page is never held longer than that.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import filesizeformat

from common.admin_forms import ReadableFormAdmin
from streams.core.templating import TemplateError, template_compile
from streams.models import Cluster, Route, RouteFilter, Schema, Topic
from streams.topics import MISSING, TopicCreateError, TopicState, topic_create, topic_names_state, topic_rows_state

# The attribute a list page's rows carry their topic's state in (set per request, on that request's rows).
_STATE = "_kafka_state"


def _state_shown(row: object) -> str:
    state: TopicState | None = getattr(row, _STATE, None)
    return state.summary if state is not None else ""


def route_literal_topic(route: Route) -> str | None:
    """The topic a Kafka route always streams, or None when it names one per request (or none)."""
    if route.kind != Route.Kind.SSE_KAFKA or not route.topic:
        return None
    try:
        template = template_compile(route.topic)
    except TemplateError:
        return None
    return route.topic if template.is_literal else None


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """Secret properties are stored as ``${env.NAME}`` references only, so this page never shows a secret."""

    list_display = ["name", "description", "bootstrap_servers", "security", "updated"]
    search_fields = ["name", "description", "bootstrap_servers"]
    readonly_fields = ["created", "updated"]
    fieldsets = [
        (None, {"fields": ["name", "description", "bootstrap_servers", "properties"]}),
        ("Schema registry", {"fields": ["registry"]}),
        ("History", {"fields": ["created", "updated"], "classes": ["collapse"]}),
    ]

    @admin.display(description="security")
    def security(self, cluster: Cluster) -> str:
        properties = cluster.properties or {}
        protocol = str(properties.get("security.protocol", "PLAINTEXT"))
        mechanism = properties.get("sasl.mechanism") or properties.get("sasl.mechanisms")
        return f"{protocol} {mechanism}" if mechanism else protocol


@admin.register(Schema)
class SchemaAdmin(ReadableFormAdmin):
    field_labels = {"json_schema": "JSON Schema (inline)", "registry_url": "Registry URL"}
    list_display = ["name", "description", "subject", "version", "updated"]
    search_fields = ["name", "description", "subject"]
    readonly_fields = ["created", "updated"]
    fieldsets = [
        (None, {"fields": ["name", "description"]}),
        ("Inline", {"fields": ["json_schema"]}),
        ("Schema registry", {"fields": ["registry_url", "subject", "version"]}),
        ("History", {"fields": ["created", "updated"], "classes": ["collapse"]}),
    ]


@admin.register(Topic)
class TopicAdmin(ReadableFormAdmin):
    """Topics Sluice serves; "Create in Kafka" makes the selected ones in their clusters (never on save)."""

    field_labels = {
        "configs": "Topic configs",
        "value_avro_schema": "Value schema (Avro)",
        "key_avro_schema": "Key schema (Avro)",
        "cache_max_messages": "Cache: most records",
        "cache_max_bytes": "Cache: most bytes",
        "cache_max_age_seconds": "Cache: oldest record (seconds)",
    }
    wide_numbers = frozenset({"cache_max_messages", "cache_max_bytes", "cache_max_age_seconds"})
    list_display = ["name", "description", "cluster", "kafka", "formats", "cache", "updated"]
    list_filter = ["cluster", "value_format"]
    search_fields = ["name", "description"]
    readonly_fields = ["created", "updated", "kafka_state"]
    actions = ["kafka_create"]
    fieldsets = [
        (None, {"fields": ["name", "description", "cluster", "schema"]}),
        (
            "In Kafka",
            {
                "fields": ["kafka_state", "partitions", "replication_factor", "configs"],
                "description": 'Sluice creates the topic only when asked: the list\'s "Create in Kafka" action, '
                "POST /api/topics/{name}/create/ or applyconfig --create-topics. These fields are what it asks for.",
            },
        ),
        (
            "Record formats",
            {
                "fields": ["value_format", "key_format", "registry", "value_avro_schema", "key_avro_schema"],
                "description": "Registry formats (avro, protobuf, jsonschema) read Confluent's wire format; "
                "values go out as compact JSON, keys are what key filters compare with.",
            },
        ),
        ("Cache", {"fields": ["cache_max_messages", "cache_max_bytes", "cache_max_age_seconds"]}),
        ("History", {"fields": ["created", "updated"], "classes": ["collapse"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Topic]:
        return super().get_queryset(request).select_related("cluster")

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        """The page's rows, each with its state in Kafka (one request per cluster for the whole page)."""
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)
        states = topic_rows_state(rows)
        for row in rows:
            setattr(row, _STATE, states.get(row.name))
        return changelist

    @admin.display(description="in Kafka")
    def kafka(self, topic: Topic) -> str:
        return _state_shown(topic)

    @admin.display(description="value / key format")
    def formats(self, topic: Topic) -> str:
        return f"{topic.value_format} / {topic.key_format}"

    @admin.display(description="cache (records, bytes, age)")
    def cache(self, topic: Topic) -> str:
        """The three cache bounds in one column, so the list fits beside its filters."""
        size = filesizeformat(topic.cache_max_bytes)
        return f"{topic.cache_max_messages:,}, {size}, {topic.cache_max_age_seconds:,} s"

    @admin.display(description="state in Kafka")
    def kafka_state(self, topic: Topic) -> str:
        if topic.pk is None:
            return "Save the topic, then create it in Kafka from the topic list."
        return topic_rows_state([topic])[topic.name].summary

    @admin.action(description="Create in Kafka")
    def kafka_create(self, request: HttpRequest, queryset: QuerySet[Topic]) -> None:
        """Create each selected topic in its cluster; one message per topic, Kafka's reason when it refuses."""
        for topic in queryset.select_related("cluster").order_by("name"):
            try:
                creation = topic_create(topic)
            except TopicCreateError as exc:
                self.message_user(request, str(exc), messages.ERROR)
                continue
            self.message_user(request, creation.message, messages.SUCCESS if creation.created else messages.INFO)


class ListLinesField(forms.Field):
    """A list of names edited one per line (a pasted JSON list works too), for a JSON list field."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 60, "spellcheck": "false"})

    def __init__(self, *, separators: str = r"\s+", **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)
        self.separators = re.compile(separators)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return "\n".join(str(item) for item in value)
        return value

    def to_python(self, value: Any) -> list[str]:
        text = "" if value is None else str(value).strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                return [str(item) for item in parsed]
        return [part for part in self.separators.split(text) if part]


class RouteForm(forms.ModelForm):
    """Origins and roles as lists, one per line: the model checks each (its error names the one that is wrong)."""

    roles = ListLinesField(
        label="Roles",
        help_text="One role per line; a token must grant all of them, e.g. read:items. Needs a guard.",
    )
    allow_origins = ListLinesField(
        separators=r"[\s,]+",
        label="Allowed origins",
        help_text="One origin per line, scheme://host[:port] with no path (https://app.example.com), or * for "
        "any. Empty: the project's SLUICE_CORS_ALLOW_ORIGINS. Other origins are refused (403).",
    )

    class Meta:
        model = Route
        fields = ["roles", "allow_origins"]  # the admin's fieldsets give the form all the others


class RouteFilterInline(admin.TabularInline):
    model = RouteFilter
    extra = 0
    fields = ["key", "headers"]


@admin.register(Route)
class RouteAdmin(ReadableFormAdmin):
    form = RouteForm
    field_labels = {
        "initial": "Start from",
        "allow_since": "Accept ?since=",
        "event_id": "Event id form",
        "binary": "Values that are not text",
        "retry_ms": "Reconnect delay (ms)",
        "heartbeat_seconds": "Heartbeat every (seconds)",
        "max_pending_bytes": "Most bytes queued per client",
        "compression_min_bytes": "Compress when events average at least (bytes)",
        "conflate": "Conflation",
        "conflate_max_rate": "Most writes per second (conflated)",
    }
    field_help = {
        # The model's says <ISO-8601 or epoch ms>, which the page takes for a tag and hides.
        "allow_since": "Clients may start at a time: ?since=2024-05-01T12:00:00Z (ISO 8601) or epoch milliseconds.",
        "event_id": "What the id of each event holds; a client resumes from either form.",
    }
    choice_labels = {
        "event_id": {
            Route.EventIdForm.ETAG: "Position: progress, plus /etag when the record has an etag header",
            Route.EventIdForm.KEY: 'Key and position: ["key","progress"] (the key in base64url)',
        }
    }
    wide_numbers = frozenset({"retry_ms", "max_pending_bytes"})
    list_display = [
        "path",
        "topic",
        "topic_in_kafka",
        "kind",
        "guard",
        "initial",
        "event_id",
        "allow_since",
        "enabled",
        "order",
        "endpoints_first",
    ]
    list_editable = ["enabled", "order"]
    list_filter = ["enabled", "kind", "guard", "initial", "event_id", "allow_since"]
    search_fields = ["path", "topic", "upstream", "description"]
    readonly_fields = ["created", "updated"]
    inlines = [RouteFilterInline]
    fieldsets = [
        (None, {"fields": ["path", "kind", "topic", "upstream", "schema", "description", "enabled", "order"]}),
        ("Stream", {"fields": ["initial", "allow_since", "event_id", "binary"]}),
        (
            "Value filters",
            {
                "fields": ["where", "client_filter"],
                "description": "Records pass the filters below, then this expression (docs/filters.md).",
            },
        ),
        ("Access", {"fields": ["guard", "roles"]}),
        ("Cross-origin (CORS)", {"fields": ["allow_origins", "allow_credentials"]}),
        ("Delivery", {"fields": ["retry_ms", "heartbeat_seconds", "max_pending_bytes"]}),
        ("Compression", {"fields": ["compression", "compression_min_bytes"]}),
        ("Conflation", {"fields": ["conflate", "conflate_max_rate"]}),
        ("History", {"fields": ["created", "updated"], "classes": ["collapse"]}),
    ]

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        """The page's routes, each with its topic's state in Kafka; a warning names those whose topic is missing."""
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)
        topics = {route.pk: route_literal_topic(route) for route in rows}
        states = topic_names_state(name for name in topics.values() if name)
        missing: list[str] = []
        for route in rows:
            state = states.get(topics[route.pk] or "")
            setattr(route, _STATE, state)
            if state is not None and state.state == MISSING:
                missing.append(f"{route.path} ({state.topic} on cluster {state.cluster})")
        if missing:
            self.message_user(
                request,
                "Routes on a topic missing from Kafka: "
                + "; ".join(missing)
                + '. Create the topic (Topics, "Create in Kafka"), or correct the route\'s topic.',
                messages.WARNING,
            )
        return changelist

    def save_model(self, request: HttpRequest, obj: Route, form: Any, change: bool) -> None:
        """Save as asked; a route whose topic Kafka does not have (a misspelling, say) is saved with a warning."""
        super().save_model(request, obj, form, change)
        name = route_literal_topic(obj)
        state = topic_names_state([name])[name] if name else None
        if state is not None and state.state == MISSING:
            self.message_user(
                request, f"Route {obj.path} is saved, but its topic {name} is {state.summary}.", messages.WARNING
            )

    @admin.display(description="topic in Kafka")
    def topic_in_kafka(self, route: Route) -> str:
        state: TopicState | None = getattr(route, _STATE, None)
        if state is None:
            return "per request" if route.kind == Route.Kind.SSE_KAFKA else ""
        return f"\u26a0 {state.summary}" if state.state == MISSING else state.summary

    @admin.display(description="Sluice's endpoints first")
    def endpoints_first(self, route: Route) -> str:
        """A general path (``/{topic}``, ``*``) never receives requests for Sluice's own endpoints: say which."""
        shadowed = route.shadowed_endpoints()
        return f"never serves {', '.join(shadowed)}" if shadowed else ""
