"""Continuous authorization (SPEC 4.3): deadlines, challenges and their extension.

Plain Python, no Django. Each open guarded stream has a :class:`StreamDeadline`
(one challenge timer, one deadline timer) registered in this process's
:class:`Deadlines` under its guard and identity. A valid challenge
response moves every matching deadline; :class:`ReauthorizationBus` carries it
to the other worker processes and gateway instances over a channel layer
(through a :class:`~streams.edge.authorization.subscription.Subscription`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from streams.core.sse import event_body
from streams.edge.authorization.subscription import ChannelLayer, NotConfirmed, Subscription
from streams.fanout.cutoffs import Cutoff, loop_cutoffs

logger = logging.getLogger("sluice.streams")

CHALLENGE_CONTENT_TYPE = "application/x-challenge-response"
# No id line: the browser's lastEventId stays where the stream's data left it.
CHALLENGE_FRAME = event_body(
    '{"method":"POST","headers":{"content-type":"' + CHALLENGE_CONTENT_TYPE + '"}}', event="challenge"
)
MESSAGE_TYPE = "sluice.reauthorize"

StreamKey = tuple[str, str]  # (guard name, identity)


class NotPublished(Exception):
    """The extension reached this process's streams but could not be sent to the other processes."""


class StreamDeadline:
    """When one guarded stream is challenged and when it ends; movable while the stream is open."""

    def __init__(
        self,
        *,
        guard: str,
        identity: str,
        roles: Iterable[str],
        expires: float,
        challenge: int = 0,
    ) -> None:
        self.key: StreamKey = (guard, identity)
        self.roles = frozenset(roles)
        self.challenge = challenge
        self.expires = expires
        self._actions: tuple[Callable[[], None], Callable[[], None]] | None = None
        self._timers: list[asyncio.TimerHandle | Cutoff] = []

    def start(self, *, on_challenge: Callable[[], None], on_expire: Callable[[], None]) -> None:
        """Arm the timers once the stream is live; an extension that came earlier is already in ``expires``."""
        self._actions = (on_challenge, on_expire)
        self.schedule(self.expires)

    def schedule(self, expires: float) -> None:
        """(Re)arm the timers for a token that expires at ``expires`` (epoch seconds)."""
        self.cancel()
        self.expires = expires
        if self._actions is None:
            return
        on_challenge, on_expire = self._actions
        loop = asyncio.get_running_loop()
        now = time.time()
        if self.challenge > 0:
            self._timers.append(loop.call_later(max(0.0, expires - self.challenge - now), on_challenge))
        # Not a plain timer: the end must come before anything delivered after ``exp``,
        # even when the loop runs late (see streams.fanout.cutoffs).
        self._timers.append(loop_cutoffs().at(expires, on_expire))

    def extend(self, roles: frozenset[str], expires: float) -> bool:
        """Move the deadline to ``expires`` if a token granting ``roles`` may keep this stream open."""
        if expires <= self.expires or not self.roles <= roles:
            return False
        self.schedule(expires)
        return True

    def cancel(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()


class Deadlines:
    """This process's open guarded streams by (guard, identity)."""

    def __init__(self) -> None:
        self._streams: dict[StreamKey, dict[StreamDeadline, None]] = {}

    def add(self, deadline: StreamDeadline) -> None:
        self._streams.setdefault(deadline.key, {})[deadline] = None

    def remove(self, deadline: StreamDeadline) -> None:
        deadline.cancel()
        streams = self._streams.get(deadline.key)
        if streams is not None:
            streams.pop(deadline, None)
            if not streams:
                del self._streams[deadline.key]

    def __contains__(self, key: StreamKey) -> bool:
        return key in self._streams

    def extend(self, *, guard: str, identity: str, roles: Iterable[str], expires: float) -> int:
        """Move the deadline of every stream of ``guard``/``identity`` whose route roles ``roles`` grant."""
        granted = frozenset(roles)
        return sum(deadline.extend(granted, expires) for deadline in list(self._streams.get((guard, identity), ())))


def group_name(key: StreamKey) -> str:
    """A channel layer group for one guard and identity (any identity text gives a valid, short name)."""
    digest = hashlib.sha256("\x00".join(key).encode("utf-8")).hexdigest()[:40]
    return f"sluice.reauthorize.{digest}"


class ReauthorizationBus:
    """Extensions for every process: one subscription per process, in the groups of the keys it holds open.

    Group membership follows the registry lazily: each change re-reads whether the
    key is still open under one lock, so joins and leaves cannot overtake each other.
    The subscription joins the groups again whenever the layer forgot them.
    """

    def __init__(
        self, registry: Deadlines, layer: ChannelLayer | None, subscription: Subscription | None = None
    ) -> None:
        self.registry = registry
        self.layer = layer
        self._owned = subscription is None
        self.subscription = Subscription(layer) if subscription is None else subscription
        self.subscription.handle(MESSAGE_TYPE, self._heard)
        self._lock = asyncio.Lock()
        self._joined: set[StreamKey] = set()
        self._pending: set[asyncio.Task[None]] = set()

    async def stream_open(self, deadline: StreamDeadline) -> None:
        """Register ``deadline``; returns once this process hears extensions for its key."""
        self.registry.add(deadline)
        await self._membership_sync(deadline.key)

    def stream_close(self, deadline: StreamDeadline) -> None:
        self.registry.remove(deadline)
        if deadline.key not in self.registry and self.layer is not None:
            task = asyncio.ensure_future(self._membership_sync(deadline.key))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def stream_reauthorize(self, *, guard: str, identity: str, roles: Iterable[str], expires: float) -> int:
        """Extend the streams of every process, this one's last; the local count.

        Returns once the extension is known to have reached every listener: the layer took
        it and has not forgotten any group membership since, nor just before (see
        :meth:`Subscription.confirm`). Raises :class:`NotPublished` otherwise, and leaves
        this process's streams at their deadline: the client must try again, and until it
        succeeds no stream counts on the new token.
        """
        granted = sorted(roles)
        if self.layer is not None:
            message = {"type": MESSAGE_TYPE, "guard": guard, "identity": identity, "roles": granted, "expires": expires}
            try:
                await self.layer.group_send(group_name((guard, identity)), message)
                await self.subscription.confirm()
            except NotConfirmed as exc:
                logger.warning("re-authorization of guard=%s identity=%s not confirmed: %s", guard, identity, exc)
                raise NotPublished(str(exc)) from exc
            except Exception as exc:
                logger.exception("re-authorization of guard=%s identity=%s not published", guard, identity)
                raise NotPublished(str(exc)) from exc
        return self.registry.extend(guard=guard, identity=identity, roles=granted, expires=expires)

    async def _membership_sync(self, key: StreamKey) -> None:
        if self.layer is None:
            return
        async with self._lock:
            try:
                await self.subscription.start()
                wanted = key in self.registry
                if wanted and key not in self._joined:
                    await self.subscription.join(group_name(key))
                    self._joined.add(key)
                elif not wanted and key in self._joined:
                    self._joined.discard(key)
                    await self.subscription.leave(group_name(key))
            except Exception:
                logger.exception("channel layer group change for guard=%s failed", key[0])

    def _heard(self, message: dict[str, Any]) -> None:
        self.registry.extend(
            guard=str(message["guard"]),
            identity=str(message["identity"]),
            roles=[str(role) for role in message["roles"]],
            expires=float(message["expires"]),
        )

    def stop(self) -> None:
        """Stop listening (a subscription of its own) and drop pending group changes (the process is going away)."""
        if self._owned:
            self.subscription.stop()
        for task in list(self._pending):
            task.cancel()
