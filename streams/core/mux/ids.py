"""The composite id of a multiplexed stream: where every member resumes, in one ``id:``.

``base64url`` without padding of ``0x02`` and then, per member in the order of
the request's ``s`` parameters, an unsigned LEB128 length and that many bytes
(empty: the member has sent no id yet). A Kafka member's part is its progress
as inside a single route's id (SPEC 2.2) before base64; a proxy member's part
is its upstream's last id as UTF-8. ``docs/multiplexing.md`` has the sizes.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from streams.core.ids import MAX_EVENT_ID_BYTES, EventIdError, b64url_decode

COMPOSITE_VERSION = 0x02


def composite_encode(parts: Sequence[bytes]) -> str:
    """The id for these member parts."""
    out = bytearray((COMPOSITE_VERSION,))
    for part in parts:
        length = len(part)
        while length >= 0x80:
            out.append((length & 0x7F) | 0x80)
            length >>= 7
        out.append(length)
        out += part
    return base64.urlsafe_b64encode(bytes(out)).rstrip(b"=").decode("ascii")


def composite_decode(text: str, members: int) -> list[bytes]:
    """The parts of a composite id for ``members`` members; :class:`EventIdError` if it is not one."""
    if len(text.encode("utf-8")) > MAX_EVENT_ID_BYTES:
        raise EventIdError(f"last event id is longer than {MAX_EVENT_ID_BYTES} bytes")
    data = b64url_decode(text)
    if not data or data[0] != COMPOSITE_VERSION:
        raise EventIdError("not the id of a multiplexed stream (open it again without an id)")
    parts: list[bytes] = []
    pos = 1
    while pos < len(data):
        length, pos = _length_read(data, pos)
        if pos + length > len(data):
            raise EventIdError("the composite id is truncated")
        parts.append(data[pos : pos + length])
        pos += length
    if len(parts) != members:
        raise EventIdError(f"the id holds {len(parts)} member position(s), but the stream has {members} member(s)")
    return parts


def _length_read(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 21 or pos >= len(data):
            raise EventIdError("the composite id has a bad length")
