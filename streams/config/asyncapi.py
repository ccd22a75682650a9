"""AsyncAPI 3.0 description of the routes (``GET /asyncapi.json``); :mod:`.asyncapi_import` reads it back.

One channel per enabled route: its address is the route's path with its
parameters, its messages the ordinary message (payload: the route's schema,
else the topic's, else text), ``delete`` (tombstones) and ``challenge``
(continuous authorization); one receive operation per channel carries the
security schemes of the route's guard. Each channel also holds the route as a
configuration item under ``x-sluice``, and the root the guards, schemas and
topics under ``x-sluice``, so the document applied to an empty database
recreates the same routes. The channel ``multiplexed`` (``/streams``) serves any
of them at once; the import passes over it.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit

from common.config.section import SECTIONS
from guards.models import Guard
from streams.config.sections import RouteSection
from streams.core.closing import CloseReason
from streams.core.clusters import ClusterError
from streams.core.formats.describe import payload_description
from streams.core.formats.registry import registry_client
from streams.core.formats.spec import TEXT, FormatError
from streams.core.templating import TemplateError, template_compile
from streams.core.where import CLIENT_MAX_DEPTH, CLIENT_MAX_LENGTH, WhereError, where_template
from streams.models import Route, Topic

ASYNCAPI_VERSION = "3.0.0"
# Never published, the document is public: guard secrets, and which cluster (internal addresses) a topic is on.
PRIVATE_FIELDS = ("secret", "cluster")

DELETE_MESSAGE = {
    "name": "delete",
    "title": "Tombstone",
    "summary": "The record's key was deleted (a Kafka message with a null value).",
    "contentType": "text/plain",
    "payload": {"type": "string", "description": "The key, base64url with padding."},
}
CHALLENGE_MESSAGE = {
    "name": "challenge",
    "title": "Challenge",
    "summary": (
        "The token expires soon: POST to the same URL with content-type application/x-challenge-response"
        " and a fresh token where the guard reads credentials."
    ),
    "contentType": "application/json",
    "payload": {
        "type": "object",
        "required": ["method", "headers"],
        "properties": {
            "method": {"type": "string", "const": "POST"},
            "headers": {
                "type": "object",
                "properties": {"content-type": {"type": "string", "const": "application/x-challenge-response"}},
            },
        },
    },
}


MUX_CHANNEL = "multiplexed"
# Marks the channel that is not a route (the import passes over it).
MUX_MARK = "x-sluice-multiplexed"
MEMBER_MESSAGE = {
    "name": "member",
    "title": "A member's event",
    "summary": "An event of one member: named '<alias>' or '<alias>.<type>', with the member's own data.",
    "contentType": "text/plain",
    "payload": {"type": "string", "description": "The member's payload, untouched."},
}
ENDED_MESSAGE = {
    "name": "ended",
    "title": "Member ended",
    "summary": "One member ended while the others go on; leave it out when reconnecting.",
    "contentType": "application/json",
    "payload": {
        "type": "object",
        "required": ["member", "reason"],
        "properties": {
            "member": {"type": "string"},
            "reason": {"type": "string", "enum": [str(CloseReason.UNAUTHORIZED), str(CloseReason.ROUTE_REMOVED)]},
        },
    },
}


def channel_id(path: str, taken: set[str]) -> str:
    """A component key (``[A-Za-z0-9._-]+``) for a route path, unique among ``taken``."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", path).strip("-") or "root"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def security_schemes(guard: Guard) -> dict[str, dict[str, Any]]:
    """The places ``guard`` reads a token from, as AsyncAPI security schemes (keyed ``<guard>-<place>``)."""
    out: dict[str, dict[str, Any]] = {}
    description = f"JWT verified by guard {guard.name}" + (f" (issuer {guard.issuer})" if guard.issuer else "")
    if guard.header_name:
        if guard.header_name.lower() == "authorization" and guard.header_template == "Bearer {credentials}":
            scheme = {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
        else:
            scheme = {"type": "httpApiKey", "name": guard.header_name, "in": "header"}
        out[f"{guard.name}-header"] = {**scheme, "description": description}
    if guard.query_param:
        out[f"{guard.name}-query"] = {
            "type": "httpApiKey",
            "name": guard.query_param,
            "in": "query",
            "description": description,
        }
    if guard.cookie_name:
        out[f"{guard.name}-cookie"] = {
            "type": "httpApiKey",
            "name": guard.cookie_name,
            "in": "cookie",
            "description": description,
        }
    return out


def message_payload(route: Route) -> tuple[dict[str, Any], str]:
    """The ordinary message's payload schema and content type: the route's schema, else its topic's."""
    schema = route.schema
    if schema is None and route.kind == Route.Kind.SSE_KAFKA:
        try:
            literal = template_compile(route.topic).is_literal
        except TemplateError:
            literal = False
        topic = Topic.objects.filter(name=route.topic).select_related("schema", "cluster").first() if literal else None
        schema = topic.schema if topic is not None else None
        if schema is None and topic is not None and topic.value_format != TEXT:
            decoded = decoded_payload(topic)
            if decoded is not None:
                return decoded, "application/json"
    if schema is None:
        return {"type": "string", "description": "The record's value, as UTF-8 text."}, "text/plain"
    if schema.json_schema is not None:
        payload = schema.json_schema if isinstance(schema.json_schema, dict) else {}
        return payload, "application/json"
    version = f" version {schema.version}" if schema.version else ""
    description = f"JSON validated against subject {schema.subject}{version} of {schema.registry_url}."
    return {"description": description}, "application/json"


def decoded_payload(topic: Topic) -> dict[str, Any] | None:
    """What pages receive from a topic whose values Sluice decodes (Avro, Protobuf, JSON Schema) as JSON Schema."""
    try:
        formats = topic.formats()
        url = formats.registry_url(os.environ) if formats.uses_registry else ""
    except (FormatError, ClusterError):
        return None

    def latest(subject: str, fmt: str | None) -> tuple[str, str] | None:
        try:
            found = registry_client(url).get_latest_version(subject, fmt=fmt).schema
        except Exception:  # an unreachable registry or a missing subject: described by format and subject
            return None
        return str(found.schema_type or "AVRO"), str(found.schema_str)

    return payload_description(formats, topic.name, latest)


def asyncapi_document(*, base_url: str) -> dict[str, Any]:
    """The AsyncAPI 3.0 document of every enabled route, served from ``base_url``."""
    parts = urlsplit(base_url)
    routes = Route.objects.filter(enabled=True).select_related("guard", "schema").prefetch_related("filters")
    route_section = RouteSection()
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    schemes: dict[str, Any] = {}
    taken: set[str] = set()
    for route in routes.order_by("order", "path"):
        cid = channel_id(route.path, taken)
        payload, content_type = message_payload(route)
        messages: dict[str, Any] = {
            "message": {
                "name": "message",
                "title": "Message",
                "summary": "A record (event type 'message'; the id resumes the stream).",
                "contentType": content_type,
                "payload": payload,
            }
        }
        if route.kind == Route.Kind.SSE_KAFKA:
            messages["delete"] = DELETE_MESSAGE
        if route.guard is not None and route.guard.challenge:
            messages["challenge"] = CHALLENGE_MESSAGE
        channel: dict[str, Any] = {
            "address": route.path,
            "title": route.description or route.path,
            "messages": messages,
            "x-sluice": route_section.export(route_section.read(route)),
        }
        if route.kind == Route.Kind.SSE_KAFKA and route.conflate:
            channel["description"] = conflation_description(route.conflate_max_rate)
        params = route_params(route.path)
        if params:
            channel["parameters"] = {name: {"description": f"Path segment {{{name}}}."} for name in params}
        channels[cid] = channel
        operation: dict[str, Any] = {
            "action": "receive",
            "summary": f"Open {route.path} as text/event-stream (EventSource).",
            "channel": {"$ref": f"#/channels/{cid}"},
            "messages": [{"$ref": f"#/channels/{cid}/messages/{name}"} for name in messages],
        }
        query = query_schema(route)
        if query is not None:
            operation["bindings"] = {"http": {"method": "GET", "query": query, "bindingVersion": "0.3.0"}}
        if route.guard is not None:
            guard_schemes = security_schemes(route.guard)
            schemes.update(guard_schemes)
            operation["security"] = [{"$ref": f"#/components/securitySchemes/{name}"} for name in guard_schemes]
            if route.roles:
                operation["description"] = f"Needs roles: {', '.join(route.roles)}."
        operations[f"receive-{cid}"] = operation
    if channels:
        channels[MUX_CHANNEL], operations[f"receive-{MUX_CHANNEL}"] = multiplexed_channel(bool(schemes))
    document: dict[str, Any] = {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": "Sluice",
            "version": "1.0.0",
            "description": "Kafka topics and upstream SSE servers as Server-Sent Events.",
        },
        "servers": {
            "sluice": {
                "host": parts.netloc or "localhost",
                "protocol": parts.scheme or "http",
                "description": "Streams open with GET (EventSource); resume with Last-Event-ID.",
            }
        },
        "defaultContentType": "text/plain",
        "channels": channels,
        "operations": operations,
        "x-sluice": config_items(),
    }
    if schemes:
        document["components"] = {"securitySchemes": schemes}
    return document


def conflation_description(max_rate: int) -> str:
    """What a conflated route's streams receive (docs/filters.md, Conflation)."""
    rate = f"at most {max_rate} writes a second, each" if max_rate else "each write"
    return (
        f"Conflated by key: {rate} with the latest record of every key that changed, so a stream that falls behind "
        "gets the newest value per key, never every step, and is not cut for being slow. Tombstones and records "
        "without a key are always sent; ids resume after the newest record sent."
    )


def query_schema(route: Route) -> dict[str, Any] | None:
    """The query parameters a route's filters read: ``where`` if it takes a client filter, its ``${query.NAME}``."""
    properties: dict[str, Any] = {}
    if route.kind == Route.Kind.SSE_KAFKA and route.client_filter:
        properties["where"] = {
            "type": "string",
            "maxLength": CLIENT_MAX_LENGTH,
            "description": (
                "A filter in the where language (docs/filters.md), ANDed with the route's own: it can only narrow. "
                f"At most {CLIENT_MAX_LENGTH} characters and {CLIENT_MAX_DEPTH} levels of nesting; no placeholders."
            ),
        }
    try:
        queries = where_template(route.where).queries if route.where.strip() else frozenset()
    except WhereError:
        queries = frozenset()
    for name in sorted(queries):
        properties[name] = {"type": "string", "description": f"Fills ${{query.{name}}} in the route's filter."}
    if not properties:
        return None
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if queries:
        schema["required"] = sorted(queries)
    return schema


def multiplexed_channel(guarded: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """``/streams``: any of the channels above in one stream (docs/multiplexing.md)."""
    messages: dict[str, Any] = {"member": MEMBER_MESSAGE, "ended": ENDED_MESSAGE}
    if guarded:
        messages["challenge"] = CHALLENGE_MESSAGE
    channel = {
        "address": "/streams",
        "title": "Several routes in one stream",
        "description": (
            "GET /streams?s=alias:/path&s=... opens the named routes' streams as one response (1 to 16 members;"
            " an alias is 1 to 32 of A-Z a-z 0-9 _ -, else the member's position). Each member's events keep"
            " their data and are named '<alias>' (a message) or '<alias>.<type>' (delete, or an upstream's type);"
            " their payloads are those of the member's own channel. The id is a composite of every member's"
            " position: Last-Event-ID resumes them all. A guarded member must admit the request's token."
        ),
        "messages": messages,
        MUX_MARK: True,
    }
    operation = {
        "action": "receive",
        "summary": "Open several routes as one text/event-stream.",
        "channel": {"$ref": f"#/channels/{MUX_CHANNEL}"},
        "messages": [{"$ref": f"#/channels/{MUX_CHANNEL}/messages/{name}"} for name in messages],
    }
    return channel, operation


def route_params(path: str) -> list[str]:
    return re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", path)


def config_items() -> dict[str, list[dict[str, Any]]]:
    """Guards (without secrets), schemas and topics (without their cluster) as configuration items, for the import."""
    out: dict[str, list[dict[str, Any]]] = {}
    for section in (SECTIONS[name] for name in ("guards", "schemas", "topics") if name in SECTIONS):
        items = [section.export(form) for form in section.rows().values()]
        items = [{k: v for k, v in item.items() if k not in PRIVATE_FIELDS} for item in items]
        if items:
            out[section.name] = items
    return out
