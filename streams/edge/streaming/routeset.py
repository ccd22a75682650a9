"""The routes one request serves: one route (its path), or several as one stream (``/streams``).

A single route is a set of one, so the request protocol (``OPTIONS``, methods, the
challenge response, CORS) is written once for both (:mod:`streams.edge.lifecycle`).
What still differs is said here: a multiplexed request names the member a refusal
is about, and its members' routes must all allow an origin for it to be allowed.
A route with no ``allow_origins`` of its own allows the project's
(``SLUICE_CORS_ALLOW_ORIGINS``); one that lists origins allows those alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.origins import origin_allowed, origin_key
from guards.verification import Principal
from streams.conf import streams_settings
from streams.core.errors import InvalidMembers, MethodNotAllowed, StreamError, UnknownRoute
from streams.core.mux.members import MemberError, MemberSpec, members_parse
from streams.core.routes import RouteKind, RouteSpec, RouteTable
from streams.edge.http.access import access_log, refusal_reason
from streams.edge.http.cors import OriginRefused
from streams.edge.http.counters import admission_refusals
from streams.edge.http.request import GUARDED_METHODS, STREAM_METHODS, StreamRequest
from streams.edge.streaming.source import StreamSource
from streams.edge.streaming.stream import Watched
from streams.selectors import route_table

# The path that serves several routes as one stream (docs/multiplexing.md).
MUX_PATH = "/streams"


@dataclass(eq=False)
class Member:
    """One route of a request: what the request named (None: its path), and what serves it once open."""

    spec: MemberSpec | None
    route: RouteSpec
    params: dict[str, str]
    principal: Principal | None = None
    source: StreamSource | None = None
    start: bytes = b""  # its composite part before it sends an id (multiplexed)
    topic_awaited: bool = False  # its configured topic was missing from Kafka: it starts at its beginning

    @property
    def alias(self) -> str:
        """Its name in a multiplexed stream (empty for a route's own stream)."""
        return self.spec.alias if self.spec is not None else ""

    @property
    def is_proxy(self) -> bool:
        return self.route.kind == RouteKind.SSE_PROXY

    @property
    def allow_origins(self) -> tuple[str, ...]:
        """The route's own origins, else the project's."""
        return route_origins(self.route)

    def refusal(self, error: StreamError) -> StreamError:
        """``error``, naming this member if it is one of several."""
        return error.for_member(self.spec.alias, self.spec.path) if self.spec is not None else error


@dataclass(eq=False)
class RouteSet:
    """The members of one stream request; ``multiplexed``: named by ``/streams``, not by the path."""

    members: list[Member]
    multiplexed: bool

    @classmethod
    def one(cls, route: RouteSpec, params: dict[str, str]) -> RouteSet:
        return cls([Member(None, route, params)], multiplexed=False)

    @property
    def routes(self) -> list[RouteSpec]:
        return [m.route for m in self.members]

    @property
    def allow_origins(self) -> tuple[str, ...]:
        """The origins every member allows (``*`` only if all allow any)."""
        if not self.multiplexed:
            return self.members[0].allow_origins
        sets = [m.allow_origins for m in self.members]
        if all("*" in origins for origins in sets):
            return ("*",)
        explicit = [{origin_key(o) for o in origins} for origins in sets if "*" not in origins]
        return tuple(sorted(set.intersection(*explicit))) if explicit else ()

    def origin_refusal(self, origin: str) -> OriginRefused | None:
        """403 naming ``origin`` and the first member whose route does not allow it; None if all do."""
        for member in self.members:
            if not origin_allowed(origin, member.allow_origins):
                refusal = OriginRefused(origin, member.route.pattern.source)
                member.refusal(refusal)
                return refusal
        return None

    @property
    def allow_credentials(self) -> bool:
        return all(route.allow_credentials for route in self.routes)

    @property
    def guarded(self) -> bool:
        return any(route.guard is not None for route in self.routes)

    @property
    def methods(self) -> tuple[str, ...]:
        """The methods the request's path answers besides ``OPTIONS`` (a guarded one takes the challenge POST)."""
        return GUARDED_METHODS if self.guarded else STREAM_METHODS

    @property
    def retry_ms(self) -> int:
        return max(m.route.retry_ms or 0 for m in self.members)

    @property
    def heartbeat_seconds(self) -> float:
        return min(m.route.heartbeat_seconds for m in self.members)

    @property
    def max_pending_bytes(self) -> int:
        return max(m.route.max_pending_bytes for m in self.members)

    def method_check(self, request: StreamRequest) -> None:
        """405 with ``allow`` unless this is a stream request (``GET`` or ``HEAD``)."""
        if request.method not in STREAM_METHODS:
            raise MethodNotAllowed(
                f"{request.method} is not allowed on a stream",
                headers=[(b"allow", ", ".join(self.methods).encode())],
            )

    def watched(self) -> list[Watched]:
        return [Watched(m.route, m.source.end) for m in self.members if m.source is not None]

    def sources_detach(self) -> None:
        for member in self.members:
            if member.source is not None:
                member.source.detach()
                member.source = None

    def waiting(self, request: StreamRequest, started: float, error: StreamError) -> None:
        """A start held while Kafka is away: logged for a route's own stream."""
        if not self.multiplexed:
            access_log("waiting", self.members[0].route, request.scope, 200, started, reason=refusal_reason(error))

    def refused(self, request: StreamRequest, error: StreamError, started: float) -> None:
        """Count (and, for a Kafka route's own stream, log) a refusal before the response started."""
        reason = refusal_reason(error)
        if self.multiplexed:
            for member in self.members:
                if member.spec is not None and error.member == member.spec.alias:
                    admission_refusals.labels(member.route.pattern.source, reason).inc()
            return
        route = self.members[0].route
        if route.kind != RouteKind.SSE_PROXY:
            admission_refusals.labels(route.pattern.source, reason).inc()
            access_log("refused", route, request.scope, error.status, started, reason=reason)


def route_origins(route: RouteSpec) -> tuple[str, ...]:
    """The origins ``route`` allows: its own, or the project's when it lists none."""
    return tuple(route.allow_origins) or tuple(streams_settings.CORS_ALLOW_ORIGINS)


def origins_named(table: RouteTable) -> frozenset[str]:
    """Every origin the configuration names (compared form): the origins refusals are counted by."""
    named = {*streams_settings.CORS_ALLOW_ORIGINS, *(o for route in table.routes for o in route.allow_origins)}
    return frozenset(origin_key(origin) for origin in named)


async def mux_resolve(request: StreamRequest) -> RouteSet:
    """The members the ``s`` parameters name, each with its route; 400 or 404 naming the member."""
    try:
        specs = members_parse(request.query.get("s", []))
    except MemberError as exc:
        raise InvalidMembers(str(exc)) from exc
    table = await route_table()
    resolved = RouteSet([], multiplexed=True)
    for spec in specs:
        found = table.match(spec.path)
        if found is None:
            raise UnknownRoute("no stream route serves this path").for_member(spec.alias, spec.path)
        route, params = found
        resolved.members.append(Member(spec, route, params))
    return resolved
