"""When each open stream is next due a keep-alive, in one-second slots.

The hubs' ticker runs once a second. Looking at every stream each time costs a
pass over all of them (5,000 idle streams: 5,000 checks a second, for a
heartbeat each is due every 15 s); the wheel hands the tick only the streams
whose slot has come, and each is put back at its next due time. A stream that
wrote in between is simply put back later: writes never touch the wheel.
"""

from __future__ import annotations

import math
from typing import Generic, TypeVar

T = TypeVar("T")


class HeartbeatWheel(Generic[T]):
    """Members by the second they are next due; :meth:`due` takes out those whose second has come."""

    __slots__ = ("_slots", "_slot_of")

    def __init__(self) -> None:
        self._slots: dict[int, dict[T, None]] = {}
        self._slot_of: dict[T, int] = {}

    def __len__(self) -> int:
        return len(self._slot_of)

    def schedule(self, member: T, at: float) -> None:
        """Put ``member`` in the slot of the second ``at`` falls in (monotonic seconds), moving it if it was in another.

        The first tick at or after the start of that second takes it: a second's slot rounded up
        would make a 1 s keep-alive a 2 s one (due at 13.05, taken by the tick at 14.05).
        """
        self.discard(member)
        slot = math.floor(at)
        self._slots.setdefault(slot, {})[member] = None
        self._slot_of[member] = slot

    def schedule_all(self, members: list[T], at: float) -> None:
        """:meth:`schedule` each of ``members``, none of them in the wheel now (as :meth:`due` leaves them)."""
        slot = math.floor(at)
        self._slots.setdefault(slot, {}).update(dict.fromkeys(members))
        self._slot_of.update(dict.fromkeys(members, slot))

    def discard(self, member: T) -> None:
        slot = self._slot_of.pop(member, None)
        if slot is None:
            return
        members = self._slots[slot]
        del members[member]
        if not members:
            del self._slots[slot]

    def due(self, now: float) -> list[T]:
        """The members whose slot is at or before ``now``, taken out (schedule them again)."""
        ready = [slot for slot in self._slots if slot <= now]
        out: list[T] = []
        for slot in sorted(ready):
            for member in self._slots.pop(slot):
                del self._slot_of[member]
                out.append(member)
        return out
