"""One Kafka record as the hub keeps it: decoded once, framed once per id form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from streams.core.ids import b64url_encode, key_event_id
from streams.core.sse import event_body, event_frame

ID_ETAG = "etag"
ID_KEY = "key"
BINARY_SKIP = "skip"
BINARY_BASE64 = "base64"

# Fixed cost of a cached record beyond its key, value and headers (object, frame).
_RECORD_OVERHEAD = 200


class Record:
    """An immutable Kafka record plus lazily built, shared SSE bytes."""

    __slots__ = (
        "partition",
        "offset",
        "timestamp",
        "key",
        "match_key",
        "problem",
        "value",
        "headers",
        "etag",
        "size",
        "progress_id",
        "verdicts",
        "_bodies",
        "_frame",
        "_frame_form",
        "_other_frames",
    )

    def __init__(
        self,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        match_key: bytes | None = None,
        problem: str | None = None,
    ) -> None:
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        # The raw key (ids and ``delete`` events carry it) and what key filters compare
        # with: the key decoded by the topic's key format, else the raw key itself.
        self.key = key
        self.match_key = key if match_key is None else match_key
        # Why the value or key could not be decoded: such a record is never sent.
        self.problem = problem
        self.value = value
        self.headers = tuple(headers) if headers else None
        self.etag: str | None = None
        # A cached record holds its value, the encoded event body and the shared live
        # frame: about three copies of the value, which is what the cache bounds count.
        size = _RECORD_OVERHEAD + len(key or b"") + 3 * len(value or b"")
        if self.headers:
            for name, header_value in self.headers:
                size += len(name) + len(header_value or b"")
                if name == "etag" and header_value is not None and self.etag is None:
                    self.etag = header_value.decode("utf-8", "replace")
        self.size = size
        # The topic's progress after this record, set by the hub for live records.
        self.progress_id: str | None = None
        # Schema verdicts by schema key, filled on first check (see streams.core.schemas).
        self.verdicts: dict[str, bool] | None = None
        self._bodies: dict[str, bytes | None] = {}
        self._frame: bytes | None = None
        self._frame_form: tuple[str, str] | None = None
        self._other_frames: dict[tuple[str, str], bytes | None] | None = None

    @classmethod
    def from_kafka(cls, message: Any) -> Record:
        """Build from a confluent-kafka ``Message`` (no error set)."""
        return cls(
            message.partition(),
            message.offset(),
            message.timestamp()[1],
            message.key(),
            message.value(),
            message.headers(),
        )

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    def body(self, binary: str = BINARY_SKIP) -> bytes | None:
        """The event without its id line; ``None`` when the value cannot be sent as text."""
        try:
            return self._bodies[binary]
        except KeyError:
            pass
        body: bytes | None
        if self.problem is not None:
            body = None
        elif self.value is None:
            body = event_body(b64url_encode(self.key) if self.key is not None else "", "delete")
        else:
            try:
                body = event_body(self.value.decode("utf-8"))
            except UnicodeDecodeError:
                body = event_body(b64url_encode(self.value)) if binary == BINARY_BASE64 else None
        self._bodies[binary] = body
        return body

    def event_id(self, progress_id: str, form: str) -> str:
        """This record's id when the stream's progress after it is ``progress_id``."""
        if form == ID_KEY:
            return key_event_id(self.key, progress_id)
        return f"{progress_id}/{self.etag}" if self.etag is not None else progress_id

    def frame(self, progress_id: str, form: str, binary: str) -> bytes | None:
        """A whole event for a stream whose progress after this record is ``progress_id``."""
        body = self.body(binary)
        if body is None:
            return None
        return event_frame(self.event_id(progress_id, form), body)

    def live_frame(self, form: str, binary: str) -> bytes | None:
        """The frame every live subscriber shares: encoded on first use, then reused.

        The common case (every stream of the topic wants the same form) keeps one
        frame in a slot; other forms go to a small dict.
        """
        wanted = (form, binary)
        if self._frame_form == wanted:
            return self._frame
        assert self.progress_id is not None, "live frames need the hub's progress"
        if self._frame_form is None:
            self._frame, self._frame_form = self.frame(self.progress_id, form, binary), wanted
            return self._frame
        if self._other_frames is None:
            self._other_frames = {}
        if wanted not in self._other_frames:
            self._other_frames[wanted] = self.frame(self.progress_id, form, binary)
        return self._other_frames[wanted]
