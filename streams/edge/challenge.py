"""Continuous authorization at the edge (SPEC 4.3): a stream's deadline, and the challenge response.

A guarded stream carries a :class:`StreamDeadline` from its token's ``exp``; it is
registered with the re-authorization bus before the response starts, so a client
that has seen ``200`` can already extend it. A ``POST`` with
``application/x-challenge-response`` and a fresh token moves the deadlines of its
holder's open streams on every worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from guards.verification import Principal
from streams.core.asgi import Send
from streams.core.errors import ReauthorizationUnavailable, StreamError
from streams.core.routes import RouteSpec
from streams.edge.admission import stream_admit
from streams.edge.counters import challenges_answered
from streams.edge.reauthorization import NotPublished, StreamDeadline
from streams.edge.request import StreamRequest
from streams.edge.responses import empty_answer, send_error
from streams.edge.runtime import reauthorization_bus
from streams.edge.teardown import Teardown


def stream_deadline(route: RouteSpec, principal: Principal | None) -> StreamDeadline | None:
    """The deadline of a stream admitted for ``principal`` (None: public, or a token without ``exp``)."""
    if principal is None or not principal.expires or route.guard is None:
        return None
    return StreamDeadline(
        guard=principal.guard,
        identity=principal.identity,
        roles=route.roles,
        expires=float(principal.expires),
        challenge=route.guard.challenge,
    )


def stream_deadlines(route: RouteSpec, principal: Principal | None) -> list[StreamDeadline]:
    deadline = stream_deadline(route, principal)
    return [deadline] if deadline is not None else []


async def deadlines_register(deadlines: Sequence[StreamDeadline], teardown: Teardown) -> None:
    """Hear challenge responses for ``deadlines`` until the stream's ``teardown``.

    Registered before the response starts: once a client sees ``200``, a challenge
    response reaches the stream.
    """
    if not deadlines:
        return
    registered: list[StreamDeadline] = []
    teardown.defer(partial(_deadlines_unregister, registered))
    bus = reauthorization_bus()
    for deadline in deadlines:
        await bus.stream_open(deadline)
        registered.append(deadline)


def _deadlines_unregister(registered: list[StreamDeadline]) -> None:
    bus = reauthorization_bus()
    for deadline in registered:
        bus.stream_close(deadline)
    registered.clear()


async def challenge_answer(route: RouteSpec, request: StreamRequest, send: Send) -> None:
    """The challenge response: a valid token for this route moves its holder's deadlines (204)."""
    try:
        principal = await stream_admit(route, request.scope, request.query)
    except StreamError as error:
        challenges_answered.labels(route.pattern.source, "refused").inc()
        await send_error(send, error)
        return
    assert principal is not None  # a guarded route admits a principal or raises
    try:
        await reauthorization_bus().stream_reauthorize(
            guard=principal.guard,
            identity=principal.identity,
            roles=principal.roles,
            expires=float(principal.expires),
        )
    except NotPublished:
        challenges_answered.labels(route.pattern.source, "unpublished").inc()
        refused = ReauthorizationUnavailable(
            "the new token could not be passed to every worker; send it again",
            headers=[(b"retry-after", b"1")],
        )
        await send_error(send, refused)
        return
    challenges_answered.labels(route.pattern.source, "accepted").inc()
    await empty_answer(send, 204, [(b"cache-control", b"no-store")])
