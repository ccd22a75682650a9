"""This process's channel on the channel layer, its groups, and whether the layer still remembers them.

Plain Python, no Django. A channel layer (Redis) may lose what it holds: a restart
without persistence, a failover to a fresh replica, a network cut long enough for
the group memberships to be dropped. Nothing tells the members. So a
:class:`Subscription` checks, every :data:`BEAT_SECONDS`, that it is still
reached: it sends a heartbeat to a group of its own and receives it on its
channel, after everything sent to it before. A heartbeat that does not come back
within :data:`LOST_SECONDS`, or any error of the layer, marks the memberships as
lost: the next beat joins every group again (``group_add`` is idempotent), then
runs the ``rejoined`` callbacks (the configuration bus reloads the route table
and holds the open streams against it, since a change may have passed meanwhile).

:meth:`Subscription.live` is what ``/readyz`` reports; :meth:`Subscription.confirm`
is what a challenge answer waits for before its ``204``: the layer has not
forgotten anyone's groups since the answer was published (a heartbeat sent after
it came back), and it has not done so in the last :data:`SETTLE_SECONDS` either,
the time every other instance needs to notice a loss and join again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

logger = logging.getLogger("sluice.streams")

BEAT_SECONDS = 0.25  # how often a subscription checks that the layer still reaches it
LOST_SECONDS = 1.0  # no heartbeat back for this long: the memberships are taken as lost
SETTLE_SECONDS = 2.0  # after a loss, how long until every instance has joined again (LOST + beats + the joins)
CONFIRM_SECONDS = 1.5  # how long a challenge answer waits for its heartbeat
JOIN_BATCH = 200  # group_add calls in flight at once when joining again
HEARTBEAT = "sluice.heartbeat"


class ChannelLayer(Protocol):
    async def new_channel(self, prefix: str = ...) -> str: ...

    async def receive(self, channel: str) -> dict[str, Any]: ...

    async def group_add(self, group: str, channel: str) -> None: ...

    async def group_discard(self, group: str, channel: str) -> None: ...

    async def group_send(self, group: str, message: dict[str, Any]) -> None: ...


class NotConfirmed(Exception):
    """The layer may not have carried a message to every instance's listeners."""


class Subscription:
    """One channel of this process in a set of groups, joined again whenever the layer forgot them."""

    def __init__(self, layer: ChannelLayer | None) -> None:
        self.layer = layer
        self.groups: set[str] = set()
        self._handlers: dict[str, Callable[[dict[str, Any]], None]] = {}
        self._rejoined: list[Callable[[], None]] = []
        self._channel: str | None = None
        self._own = f"sluice.alive.{uuid.uuid4().hex}"
        self._lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._stale = True  # the memberships must be (re)made before anything is heard
        self._failing = False  # an outage was logged (one warning per outage)
        self._sent = 0  # heartbeats sent, and the highest one received back
        self._received = 0
        self._heard_at = 0.0  # monotonic time of the last heartbeat back
        self._lost = False  # a loss was noticed since the first join
        self._rejoined_at: float | None = None  # when the groups were last joined again after a loss
        self._beat = asyncio.Event()

    def handle(self, message_type: str, handler: Callable[[dict[str, Any]], None]) -> None:
        self._handlers[message_type] = handler

    def on_rejoined(self, callback: Callable[[], None]) -> None:
        """``callback()`` after the groups were joined again following a loss."""
        self._rejoined.append(callback)

    @property
    def started(self) -> bool:
        return self._channel is not None

    async def start(self) -> None:
        """Take a channel, join the groups, and hear one heartbeat back (bounded); later calls return at once."""
        if self.layer is None or self._channel is not None:
            return
        async with self._lock:
            if self._channel is not None:
                return
            self._channel = await self.layer.new_channel()
        self._tasks = [asyncio.ensure_future(self._listen()), asyncio.ensure_future(self._keep())]
        # The layer away: /readyz says so, and the beats join once it answers.
        with contextlib.suppress(NotConfirmed):
            await self._heartbeat_wait(1, CONFIRM_SECONDS, strict=False)

    async def join(self, group: str) -> None:
        """Join ``group`` (at the next beat if the layer does not answer now)."""
        async with self._lock:
            self.groups.add(group)
            if self.layer is None or self._channel is None or self._stale:
                return
            try:
                await self.layer.group_add(group, self._channel)
            except Exception as exc:
                self._trouble(exc)

    async def leave(self, group: str) -> None:
        async with self._lock:
            self.groups.discard(group)
            if self.layer is None or self._channel is None or self._stale:
                return
            try:
                await self.layer.group_discard(group, self._channel)
            except Exception as exc:
                self._trouble(exc)

    def live(self) -> tuple[bool, str]:
        """Whether this process is reached through its groups now, and why not."""
        if self.layer is None:
            return True, "no channel layer configured"
        if self._channel is None:
            return False, "not subscribed yet"
        if self._stale:
            return False, "group memberships lost; joining again once the layer answers"
        age = time.monotonic() - self._heard_at
        if age > LOST_SECONDS:
            return False, f"no heartbeat through the layer for {age:.1f}s"
        return True, ""

    async def confirm(self) -> None:
        """Return once everything this process published before is known to reach every listener.

        Raises :class:`NotConfirmed` when the layer forgot memberships since, or so recently
        that another instance may not have joined again yet.
        """
        if self.layer is None:
            return
        await self.start()
        await self._heartbeat_wait(self._sent + 1, CONFIRM_SECONDS)
        if self._rejoined_at is not None and time.monotonic() - self._rejoined_at < SETTLE_SECONDS:
            raise NotConfirmed("the channel layer lost its group memberships moments ago")

    def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks = []

    async def _heartbeat_wait(self, number: int, within: float, *, strict: bool = True) -> None:
        """Wait until heartbeat ``number`` (or a later one) came back; ``strict``: fail at once on a loss."""
        deadline = time.monotonic() + within
        while self._received < number:
            if strict and self._stale:
                raise NotConfirmed("the channel layer lost its group memberships")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NotConfirmed("no heartbeat back through the channel layer")
            self._beat.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._beat.wait(), remaining)

    async def _listen(self) -> None:
        assert self.layer is not None
        assert self._channel is not None
        while True:
            try:
                message = await self.layer.receive(self._channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # redis-py's TimeoutError (not the builtin): an idle blocking read outlasted the client's
                # socket timeout. Not a loss by itself: the heartbeats tell whether the layer still reaches us.
                if type(exc).__name__ != "TimeoutError":
                    self._trouble(exc)
                    await asyncio.sleep(BEAT_SECONDS)
                continue
            kind = message.get("type")
            if kind == HEARTBEAT:
                self._received = max(self._received, int(message.get("n", 0)))
                self._heard_at = time.monotonic()
                self._beat.set()
                continue
            handler = self._handlers.get(str(kind))
            if handler is not None:
                try:
                    handler(message)
                except Exception:
                    logger.exception("channel layer message %s not handled", kind)

    async def _keep(self) -> None:
        """Every beat: join again if the memberships were lost, then send the next heartbeat."""
        assert self.layer is not None
        while True:
            try:
                if not self._stale and self._sent > self._received and time.monotonic() - self._heard_at > LOST_SECONDS:
                    self._trouble(None)
                if self._stale:
                    await self._join_all()
                self._sent += 1
                await self.layer.group_send(self._own, {"type": HEARTBEAT, "n": self._sent})
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._trouble(exc)
            await asyncio.sleep(BEAT_SECONDS)

    async def _join_all(self) -> None:
        assert self.layer is not None
        assert self._channel is not None
        layer, channel = self.layer, self._channel
        first = not self._lost
        async with self._lock:  # no join or leave in between: each sees the memberships made or not made
            groups = [self._own, *self.groups]
            for start in range(0, len(groups), JOIN_BATCH):
                await asyncio.gather(*(layer.group_add(g, channel) for g in groups[start : start + JOIN_BATCH]))
            self._stale = False
        self._heard_at = time.monotonic()  # the heartbeat sent next is the proof
        if self._failing:
            logger.info("channel layer answers again: %d group(s) joined again", len(groups) - 1)
            self._failing = False
        if first:
            return
        self._rejoined_at = time.monotonic()  # other instances join again within SETTLE_SECONDS of this
        for callback in self._rejoined:
            try:
                callback()
            except Exception:
                logger.exception("channel layer rejoin callback failed")

    def _trouble(self, exc: BaseException | None) -> None:
        """The layer failed or forgot us: join again at the next beat; one warning per outage."""
        if not self._stale:
            self._lost = True
        self._stale = True
        self._beat.set()  # a waiting confirmation fails at once
        if not self._failing:
            self._failing = True
            cause = "no heartbeat back (memberships lost)" if exc is None else f"{type(exc).__name__}: {exc}"
            logger.warning("channel layer unavailable (%s); joining the groups again once it answers", cause)
