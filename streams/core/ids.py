"""Event ids: the Zilla-compatible progress codec and the two id forms (SPEC 2.2).

A progress token records, for every partition of a topic, the NEXT offset to
read. It is ``base64url_padded(0x01, zz(count), [zz(partition), zz(offset)]...)``
with zig-zag varints, so ``{0: 2, 1: 1}`` is ``AQQABAIC``.

An event id is ``<progress>``, ``<progress>/<etag>`` or, for routes with
``event_id: key``, the JSON array ``["<base64url(key)>|null","<progress>"]``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PROGRESS_VERSION = 0x01
MAX_EVENT_ID_BYTES = 1024
# A topic with more partitions than this is not something an id should claim.
_MAX_PARTITIONS = 100_000
# Whole quanta, then an optional last one with or without its padding. The
# standard decoder would silently drop stray characters and extra '='.
_B64URL = re.compile(r"(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}(?:==)?|[A-Za-z0-9_-]{3}=?)?\Z")


class EventIdError(ValueError):
    """An event id (or progress token) that is not well formed."""


def _zigzag_varint(value: int, out: bytearray) -> None:
    encoded = (value << 1) ^ (value >> 63)
    encoded &= 0xFFFFFFFFFFFFFFFF
    while encoded >= 0x80:
        out.append((encoded & 0x7F) | 0x80)
        encoded >>= 7
    out.append(encoded)


def _read_zigzag_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise EventIdError("progress token is truncated")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise EventIdError("progress token has an over-long varint")
    return (result >> 1) ^ -(result & 1), pos


def b64url_encode(raw: bytes) -> str:
    """Base64url with ``=`` padding, as Zilla writes it."""
    return base64.urlsafe_b64encode(raw).decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode base64url, padded or not; raise :class:`EventIdError` on bad input."""
    if not _B64URL.match(text):
        raise EventIdError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise EventIdError("not base64url") from exc


def progress_encode(progress: Mapping[int, int] | Iterable[tuple[int, int]]) -> str:
    """Encode ``{partition: next_offset}`` (partitions in ascending order)."""
    items = sorted(progress.items() if isinstance(progress, Mapping) else progress)
    out = bytearray((PROGRESS_VERSION,))
    _zigzag_varint(len(items), out)
    for partition, offset in items:
        _zigzag_varint(partition, out)
        _zigzag_varint(offset, out)
    return b64url_encode(bytes(out))


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    _zigzag_varint(value, out)
    return bytes(out)


class ProgressEncoder:
    """The progress token of a position that moves one partition at a time.

    Every partition's bytes are kept encoded, so a move re-encodes one offset
    rather than the whole position: a hub moves once per record and writes the
    token into that record's id (``{0: 2, 1: 1}`` is again ``AQQABAIC``).
    """

    __slots__ = ("_offset_at", "_parts", "_token")

    def __init__(self, positions: Mapping[int, int]) -> None:
        items = sorted(positions.items())
        self._parts: list[bytes] = [bytes((PROGRESS_VERSION,)) + _varint_bytes(len(items))]
        # Where each partition's offset sits in ``_parts`` (its partition number sits before it).
        self._offset_at: dict[int, int] = {}
        for partition, offset in items:
            self._parts.append(_varint_bytes(partition))
            self._offset_at[partition] = len(self._parts)
            self._parts.append(_varint_bytes(offset))
        self._token: str | None = None

    def move(self, partition: int, offset: int) -> None:
        """``partition``'s next offset is now ``offset`` (a partition it was not made with: KeyError)."""
        self._parts[self._offset_at[partition]] = _varint_bytes(offset)
        self._token = None

    @property
    def token(self) -> str:
        """The position's token (encoded once per move, on first use)."""
        if self._token is None:
            self._token = b64url_encode(b"".join(self._parts))
        return self._token


def progress_decode(token: str) -> dict[int, int]:
    """Decode a progress token into ``{partition: next_offset}``."""
    return progress_from_bytes(b64url_decode(token))


def progress_from_bytes(data: bytes) -> dict[int, int]:
    """Decode a progress token's bytes (before base64) into ``{partition: next_offset}``."""
    if not data or data[0] != PROGRESS_VERSION:
        raise EventIdError("progress token has an unknown version")
    count, pos = _read_zigzag_varint(data, 1)
    if count < 0 or count > _MAX_PARTITIONS:
        raise EventIdError("progress token has an impossible partition count")
    progress: dict[int, int] = {}
    for _ in range(count):
        partition, pos = _read_zigzag_varint(data, pos)
        offset, pos = _read_zigzag_varint(data, pos)
        if partition < 0 or offset < 0:
            raise EventIdError("progress token holds a negative partition or offset")
        if partition in progress:
            raise EventIdError("progress token names a partition twice")
        progress[partition] = offset
    if pos != len(data):
        raise EventIdError("progress token has trailing bytes")
    return progress


@dataclass(frozen=True, slots=True)
class EventId:
    """A parsed last event id: where to resume, plus what the id carried besides."""

    progress: dict[int, int]
    etag: str | None = None
    key: bytes | None = None


def event_id_parse(text: str) -> EventId:
    """Parse any id form Sluice writes: ``progress``, ``progress/etag`` or the key array."""
    if len(text.encode("utf-8")) > MAX_EVENT_ID_BYTES:
        raise EventIdError(f"last event id is longer than {MAX_EVENT_ID_BYTES} bytes")
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError) as exc:  # "[[[[..." recurses before it fails to decode
            raise EventIdError("last event id is not a valid JSON array") from exc
        if (
            not isinstance(parsed, list)
            or len(parsed) != 2
            or not (parsed[0] is None or isinstance(parsed[0], str))
            or not isinstance(parsed[1], str)
        ):
            raise EventIdError('last event id must be ["<key>|null","<progress>"]')
        if parsed[1].startswith("["):
            raise EventIdError("last event id arrays do not nest")
        key = None if parsed[0] is None else b64url_decode(parsed[0])
        inner = event_id_parse(parsed[1])
        return EventId(progress=inner.progress, etag=inner.etag, key=key)
    token, _, etag = text.partition("/")
    return EventId(progress=progress_decode(token), etag=etag or None)


def key_event_id(key: bytes | None, progress_id: str) -> str:
    """The ``event_id: key`` form: a JSON array with no spaces."""
    encoded_key = "null" if key is None else f'"{b64url_encode(key)}"'
    return f'[{encoded_key},"{progress_id}"]'


def id_progress_token(event_id: str) -> str:
    """The progress token inside any id form Sluice writes (without checking it)."""
    if event_id.startswith("["):
        return event_id[event_id.rfind(",") + 2 : -2]
    return event_id.partition("/")[0]
