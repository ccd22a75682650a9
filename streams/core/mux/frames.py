"""A member's frames as the multiplexed stream writes them.

The hubs and upstreams write whole SSE blocks (``id``, ``event``, ``data`` lines
and comments, ``\\n`` line ends). :class:`MuxFramer` takes each member's
blocks as they are written and gives the bytes for the shared connection:

- ``event: <alias>`` for a default event, ``event: <alias>.<type>`` for any
  other, the ``data:`` lines untouched;
- the member's ``id:`` folded into the composite id, which replaces it;
- an id-only checkpoint stays one, with the composite id; comments pass;
- the members' ``retry:`` lines are dropped: the stream's own preamble has one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from streams.core.ids import b64url_decode, id_progress_token
from streams.core.mux.ids import composite_encode
from streams.core.sse import event_body, id_line, preamble

# Where a member's id goes in its composite part: Kafka progress bytes, or the upstream's id as text.
PartOf = Callable[[str], bytes]


def kafka_part(event_id: str) -> bytes:
    """A Kafka member's part: the progress of its id, before base64."""
    return b64url_decode(id_progress_token(event_id))


def proxy_part(event_id: str) -> bytes:
    return event_id.encode("utf-8")


class MuxFramer:
    """Relabels the members' blocks and keeps the composite id of what the client was sent."""

    __slots__ = ("aliases", "parts", "_part_of", "_names", "_id_line")

    def __init__(self, aliases: Sequence[str], part_of: Sequence[PartOf], parts: Sequence[bytes]) -> None:
        self.aliases = tuple(aliases)
        self._part_of = tuple(part_of)
        self.parts = list(parts)
        self._names = [alias.encode("utf-8") for alias in aliases]
        self._id_line = id_line(self.composite_id)

    @property
    def composite_id(self) -> str:
        return composite_encode(self.parts)

    def preamble(self, retry_ms: int | None) -> bytes:
        """The stream's first bytes: its reconnection delay and where every member starts."""
        return preamble(retry_ms, self.composite_id)

    def frames(self, member: int, data: bytes) -> bytes:
        """``data``, whole blocks written by member ``member``, as the shared stream carries them."""
        out = bytearray()
        for block in data.split(b"\n\n"):
            if block:
                out += self._block(member, block)
        return bytes(out)

    def ended(self, member: int, reason: str) -> bytes:
        """The ``ended`` event: this member stopped while the others go on."""
        document = json.dumps({"member": self.aliases[member], "reason": reason}, separators=(",", ":"))
        return event_body(document, event="ended")

    def _block(self, member: int, block: bytes) -> bytes:
        event: bytes | None = None
        data: list[bytes] = []
        comment = has_id = moved = False
        for line in block.split(b"\n"):
            if line.startswith(b"data:"):
                data.append(line)
            elif line.startswith(b"id: "):
                part = self._part_of[member](line[4:].decode("utf-8"))
                has_id = True
                moved = part != self.parts[member]
                self.parts[member] = part
            elif line.startswith(b"event: "):
                event = line[7:]
            elif line.startswith(b":"):
                comment = True
            # retry: the stream's own preamble carries one
        if moved:
            self._id_line = id_line(self.composite_id)
        if data:
            name = self._names[member] if event is None else self._names[member] + b"." + event
            head = self._id_line if has_id else b""
            return head + b"event: " + name + b"\n" + b"\n".join(data) + b"\n\n"
        if moved:
            return (b":\n" if comment else b"") + self._id_line + b"\n"
        return b":\n\n" if comment else b""
