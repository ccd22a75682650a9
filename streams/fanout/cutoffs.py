"""Ends that must come before any delivery after their time: a token's ``exp`` (SPEC 4.3).

A loop timer alone does not keep that promise. When the event loop runs late
(a busy machine, a long batch), the batches the fetch threads queued meanwhile
run before the timers that came due, so a stream whose token expired would
still be written what arrived after its ``exp``. :class:`Cutoffs` holds the ends
in a heap by wall-clock time; every delivery path (a hub's batch, a catch-up's
chunk, an upstream's event) calls :meth:`Cutoffs.run_due` before it writes,
which costs one look at the heap's top when nothing is due. One loop timer, for
the earliest end, ends streams that nothing is written to.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
import weakref
from collections.abc import Callable

# Cancelled ends the heap may hold before it is rebuilt without them (and only when they are most of it).
COMPACT_AFTER = 64


class Cutoff:
    """One end, cancellable until it runs."""

    __slots__ = ("action", "owner")

    def __init__(self, action: Callable[[], object], owner: Cutoffs) -> None:
        self.action: Callable[[], object] | None = action
        self.owner = owner

    def cancel(self) -> None:
        if self.action is not None:
            self.action = None
            self.owner.note_cancelled()

    @property
    def cancelled(self) -> bool:
        return self.action is None


class Cutoffs:
    """One event loop's ends by wall-clock time (epoch seconds)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, clock: Callable[[], float] = time.time) -> None:
        self._loop = loop
        self._clock = clock
        self._heap: list[tuple[float, int, Cutoff]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_when = float("inf")
        self._cancelled = 0  # cancelled ends still in the heap

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, when: float, action: Callable[[], object]) -> Cutoff:
        """Run ``action`` at ``when``, or before the first delivery after it, whichever comes first."""
        cutoff = Cutoff(action, self)
        heapq.heappush(self._heap, (when, next(self._order), cutoff))
        if when < self._timer_when:
            self._arm()
        return cutoff

    def note_cancelled(self) -> None:
        """One end was cancelled (its stream closed, or its token was extended).

        Its entry stays in the heap until its time; once they are most of the heap (long-lived
        tokens, streams that come and go) the heap is rebuilt without them.
        """
        self._cancelled += 1
        heap = self._heap
        if self._cancelled > COMPACT_AFTER and self._cancelled * 2 > len(heap):
            heap[:] = [entry for entry in heap if not entry[2].cancelled]
            heapq.heapify(heap)
            self._cancelled = 0

    def run_due(self) -> None:
        """Run every end whose time has come (call before writing anything that arrived by now)."""
        heap = self._heap
        if not heap or heap[0][0] > self._clock():
            return
        now = self._clock()
        while heap and heap[0][0] <= now:
            cutoff = heapq.heappop(heap)[2]
            action, cutoff.action = cutoff.action, None
            if action is None:
                self._cancelled -= 1
            else:
                action()
        self._arm()

    def _arm(self) -> None:
        """One timer, at the earliest end still waiting (cancelled ones are dropped from the top first)."""
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
            self._cancelled -= 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_when = heap[0][0] if heap else float("inf")
        if heap:
            delay = max(0.0, self._timer_when - self._clock())
            self._timer = self._loop.call_at(self._loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_when = float("inf")
        self.run_due()
        if self._timer is None:
            self._arm()


_per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Cutoffs] = weakref.WeakKeyDictionary()


def loop_cutoffs() -> Cutoffs:
    """The running loop's :class:`Cutoffs` (a worker process has one loop: one heap, one timer)."""
    loop = asyncio.get_running_loop()
    cutoffs = _per_loop.get(loop)
    if cutoffs is None:
        cutoffs = _per_loop[loop] = Cutoffs(loop)
    return cutoffs
