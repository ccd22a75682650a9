"""Errors a client can cause, each with one status code and one JSON body."""

from __future__ import annotations

import json


class StreamError(Exception):
    """A refused stream request. ``code`` is stable; ``detail`` is for people."""

    status = 400
    code = "bad_request"

    def __init__(self, detail: str, *, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or []

    def body(self) -> bytes:
        return json.dumps({"error": self.code, "status": self.status, "detail": self.detail}).encode("utf-8")


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
