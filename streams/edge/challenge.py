"""Continuous authorization at the edge (SPEC 4.3): a stream's deadlines, and the challenge response.

A guarded stream carries a :class:`StreamDeadline` per guard and identity of its
members, from their tokens' ``exp``; it is registered with the re-authorization
bus before the response starts (:meth:`~streams.edge.streaming.ending.StreamEnd.deadlines_register`),
so a client that has seen ``200`` can already extend it. A ``POST`` with
``application/x-challenge-response`` and a fresh token moves the deadlines of its
holder's open streams on every worker.
"""

from __future__ import annotations

from collections.abc import Sequence

from guards.verification import Principal
from streams.core.asgi import Send
from streams.core.errors import ReauthorizationUnavailable, StreamError
from streams.edge.authorization.admission import stream_admit
from streams.edge.authorization.reauthorization import NotPublished, StreamDeadline
from streams.edge.http.counters import challenges_answered
from streams.edge.http.request import StreamRequest
from streams.edge.http.responses import empty_answer, send_error
from streams.edge.runtime import WorkerRuntime
from streams.edge.streaming.routeset import Member, RouteSet


def stream_deadlines(members: Sequence[Member]) -> list[StreamDeadline]:
    """One deadline per guard and identity among the guarded members; each ends the whole stream.

    None for public members, or tokens without ``exp``.
    """
    grouped: dict[tuple[str, str], tuple[set[str], float, int]] = {}
    for member in members:
        principal, guard = member.principal, member.route.guard
        if principal is None or guard is None or not principal.expires:
            continue
        key = (principal.guard, principal.identity)
        roles, expires, challenge = grouped.get(key, (set(), float(principal.expires), 0))
        roles |= set(member.route.roles)
        if guard.challenge > 0:
            challenge = min(challenge, guard.challenge) if challenge else guard.challenge
        grouped[key] = (roles, min(expires, float(principal.expires)), challenge)
    return [
        StreamDeadline(guard=guard, identity=identity, roles=roles, expires=expires, challenge=challenge)
        for (guard, identity), (roles, expires, challenge) in grouped.items()
    ]


async def challenge_answer(runtime: WorkerRuntime, routes: RouteSet, request: StreamRequest, send: Send) -> None:
    """A fresh token that admits every guarded member moves its holder's deadlines (204)."""
    guarded = [m for m in routes.members if m.route.guard is not None]
    principals: dict[tuple[str, str], Principal] = {}
    for member in guarded:
        try:
            principal = await stream_admit(member.route, request.scope, request.query)
        except StreamError as error:
            challenges_answered.labels(member.route.pattern.source, "refused").inc()
            await send_error(send, member.refusal(error))
            return
        assert principal is not None  # a guarded route admits a principal or raises
        principals[(principal.guard, principal.identity)] = principal
    bus = runtime.reauthorization()
    try:
        for principal in principals.values():
            await bus.stream_reauthorize(
                guard=principal.guard,
                identity=principal.identity,
                roles=principal.roles,
                expires=float(principal.expires),
            )
    except NotPublished:
        for member in guarded:
            challenges_answered.labels(member.route.pattern.source, "unpublished").inc()
        refused = ReauthorizationUnavailable(
            "the new token could not be passed to every worker; send it again", headers=[(b"retry-after", b"1")]
        )
        await send_error(send, refused)
        return
    for member in guarded:
        challenges_answered.labels(member.route.pattern.source, "accepted").inc()
    await empty_answer(send, 204, [(b"cache-control", b"no-store")])
