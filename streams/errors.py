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

    def body(self) -> bytes:
        document: dict[str, object] = {"error": self.code, "status": self.status, "detail": self.detail}
        if self.reason is not None:
            document["reason"] = self.reason
        return json.dumps(document).encode("utf-8")


class InvalidLastEventId(StreamError):
    code = "invalid_last_event_id"


class InvalidSince(StreamError):
    code = "invalid_since"


class InvalidParameter(StreamError):
    code = "invalid_parameter"


class UnknownTopic(StreamError):
    status = 404
    code = "unknown_topic"


class MethodNotAllowed(StreamError):
    status = 405
    code = "method_not_allowed"


class KafkaNotAvailable(StreamError):
    status = 503
    code = "kafka_unavailable"


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


class TooManyStreams(StreamError):
    """An address at its limit of open streams (``MAX_STREAMS_PER_ADDRESS``)."""

    status = 429
    code = "too_many_streams"
