"""Admin pages for topics and routes: searchable, filterable, validated on the form."""

from __future__ import annotations

from django.contrib import admin

from streams.models import Cluster, Route, RouteFilter, Schema, Topic


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
class SchemaAdmin(admin.ModelAdmin):
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
class TopicAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "description",
        "cluster",
        "value_format",
        "key_format",
        "cache_max_messages",
        "cache_max_bytes",
        "cache_max_age_seconds",
        "updated",
    ]
    list_filter = ["cluster", "value_format"]
    search_fields = ["name", "description"]
    readonly_fields = ["created", "updated"]
    fieldsets = [
        (None, {"fields": ["name", "description", "cluster", "schema"]}),
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


class RouteFilterInline(admin.TabularInline):
    model = RouteFilter
    extra = 0
    fields = ["key", "headers"]


@admin.register(Route)
class RouteAdmin(admin.ModelAdmin):
    list_display = [
        "path",
        "topic",
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
        ("Access", {"fields": ["guard", "roles"]}),
        ("Cross-origin (CORS)", {"fields": ["allow_origins", "allow_credentials"]}),
        ("Delivery", {"fields": ["retry_ms", "heartbeat_seconds", "max_pending_bytes"]}),
        ("History", {"fields": ["created", "updated"], "classes": ["collapse"]}),
    ]

    @admin.display(description="Sluice's endpoints first")
    def endpoints_first(self, route: Route) -> str:
        """A general path (``/{topic}``, ``*``) never receives requests for Sluice's own endpoints: say which."""
        shadowed = route.shadowed_endpoints()
        return f"never serves {', '.join(shadowed)}" if shadowed else ""
