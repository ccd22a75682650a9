"""A test-side SSE parser (the browser's algorithm), independent of the server's code."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Event:
    id: str | None  # the last event id after this event (browser semantics)
    type: str
    data: str
    has_data: bool


class EventParser:
    """Feed bytes, get events. Id-only blocks come out with ``has_data=False``."""

    def __init__(self) -> None:
        self._buffer = b""
        self.last_id: str | None = None
        self.retry: int | None = None
        self.comments = 0
        self._data: list[str] = []
        self._type = ""
        self._seen_id = False

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk
        events: list[Event] = []
        while True:
            cut = -1
            for i, byte in enumerate(self._buffer):
                if byte in (10, 13):
                    cut = i
                    break
            if cut < 0:
                break
            line = self._buffer[:cut].decode("utf-8")
            skip = 2 if self._buffer[cut : cut + 2] == b"\r\n" else 1
            if self._buffer[cut] == 13 and cut + 1 == len(self._buffer):
                break  # a CR at the end may be the start of CRLF: wait for more
            self._buffer = self._buffer[cut + skip :]
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> Event | None:
        if line == "":
            if not self._data and not self._seen_id:
                self._type = ""
                return None
            event = Event(self.last_id, self._type or "message", "\n".join(self._data), bool(self._data))
            self._data, self._type, self._seen_id = [], "", False
            return event
        if line.startswith(":"):
            self.comments += 1
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._type = value
        elif name == "id" and "\x00" not in value:
            self.last_id = value
            self._seen_id = True
        elif name == "retry" and value.isdigit():
            self.retry = int(value)
        return None
