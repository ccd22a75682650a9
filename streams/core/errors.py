"""Errors a client can cause, each with one status code and one JSON body."""

from __future__ import annotations

import json


class StreamError(Exception):
    """A refused stream request. ``code`` is stable; ``detail`` is for people."""

    status = 400
    code = "bad_request"

    def __init__(
        self, detail: str, *, headers: list[tuple[bytes, bytes]] | None = None, reason: str | None = None
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or []
        self.reason = reason
        self.member: str | None = None

    def for_member(self, alias: str, path: str) -> StreamError:
        """The same refusal, naming the member of a multiplexed stream that caused it."""
        self.member = alias
        self.detail = f"member {alias} ({path}): {self.detail}"
        return self

    def fields(self) -> dict[str, object]:
        """More members of the JSON body (a subclass names what it adds)."""
        return {}

    def body(self) -> bytes:
        document: dict[str, object] = {"error": self.code, "status": self.status, "detail": self.detail}
        if self.reason is not None:
            document["reason"] = self.reason
        if self.member is not None:
            document["member"] = self.member
        document.update(self.fields())
        return json.dumps(document).encode("utf-8")


class InvalidLastEventId(StreamError):
    code = "invalid_last_event_id"


class InvalidSince(StreamError):
    code = "invalid_since"


class InvalidParameter(StreamError):
    code = "invalid_parameter"


class InvalidFilter(StreamError):
    """A client's ``?where=`` that does not parse, is over a limit, or is not taken here; ``position`` is 1-based."""

    code = "invalid_filter"

    def __init__(self, detail: str, *, position: int = 0) -> None:
        super().__init__(detail)
        self.position = position

    def fields(self) -> dict[str, object]:
        return {"position": self.position} if self.position else {}


class InvalidMembers(StreamError):
    """The ``s`` parameters of a multiplexed stream name no valid set of members."""

    code = "invalid_members"


class UnknownRoute(StreamError):
    status = 404
    code = "unknown_route"


class UnknownTopic(StreamError):
    """A topic Kafka does not have; ``configured``: one the configuration names (it may be created yet)."""

    status = 404
    code = "unknown_topic"

    def __init__(self, detail: str, *, topic: str = "", configured: bool = False) -> None:
        super().__init__(detail)
        self.topic = topic
        self.configured = configured

    def fields(self) -> dict[str, object]:
        return {"configured": True} if self.configured else {}


class MethodNotAllowed(StreamError):
    status = 405
    code = "method_not_allowed"


class KafkaNotAvailable(StreamError):
    """Kafka did not answer; ``cause`` says why when librdkafka told (tls, authentication, unreachable)."""

    status = 503
    code = "kafka_unavailable"

    def __init__(
        self, detail: str, *, cause: str | None = None, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        super().__init__(detail, headers=headers)
        self.cause = cause

    def fields(self) -> dict[str, object]:
        return {"cause": self.cause} if self.cause is not None else {}


class MissingCredentials(StreamError):
    """A guarded route asked for without a token (SPEC 4.2)."""

    status = 401
    code = "unauthorized"


class InvalidToken(StreamError):
    """A token the guard refuses; ``reason`` names why (expired, bad_signature, ...)."""

    status = 401
    code = "invalid_token"


class InsufficientRoles(StreamError):
    """A valid token that does not grant every role the route requires."""

    status = 403
    code = "forbidden"


class KeysNotAvailable(StreamError):
    """The guard's JWKS URL has never answered with keys: not the client's fault."""

    status = 503
    code = "keys_unavailable"


class ReauthorizationUnavailable(StreamError):
    """A valid challenge response that could not reach every worker: the client should send it again."""

    status = 503
    code = "reauthorization_unavailable"


class UpstreamRefused(StreamError):
    """An ``sse-proxy`` route whose upstream refused to open (4xx or not an event stream, SPEC 3)."""

    status = 502
    code = "upstream_refused"

    def __init__(self, detail: str, *, upstream_status: int, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(detail, headers=headers)
        self.upstream_status = upstream_status

    def fields(self) -> dict[str, object]:
        return {"upstream_status": self.upstream_status}


class UpstreamNotAvailable(StreamError):
    """An ``sse-proxy`` route whose upstream did not answer, or answered 5xx, at open."""

    status = 502
    code = "upstream_unavailable"

    def __init__(
        self, detail: str, *, upstream_status: int | None = None, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        super().__init__(detail, headers=headers)
        self.upstream_status = upstream_status

    def fields(self) -> dict[str, object]:
        return {"upstream_status": self.upstream_status} if self.upstream_status is not None else {}


class OriginNotAllowed(StreamError):
    """A CORS preflight from an origin (or for a method) the route does not allow."""

    status = 403
    code = "origin_not_allowed"


class TooManyStreams(StreamError):
    """An address at its limit of open streams (``MAX_STREAMS_PER_ADDRESS``)."""

    status = 429
    code = "too_many_streams"


class DatabaseNotAvailable(StreamError):
    """The database does not answer and nothing read before it can stand in (a gateway started while it is away)."""

    status = 503
    code = "database_unavailable"


class AdmissionsBusy(StreamError):
    """The worker admitted as many new streams this second as ``ADMISSIONS_PER_SECOND`` allows."""

    status = 503
    code = "admissions_busy"
