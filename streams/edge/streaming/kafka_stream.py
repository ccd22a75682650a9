"""A stream of a Kafka topic (``sse-kafka`` routes): its start planned, then served from the hub.

Everything that can refuse the request happens before the response starts
(:func:`hub_stream_open`), so a refusal is a status and a JSON body; once ``200``
is out, the hub writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from guards.verification import Principal
from streams.core.closing import CloseReason
from streams.core.clusters import ClusterError
from streams.core.errors import InvalidLastEventId, InvalidParameter, KafkaNotAvailable, UnknownTopic
from streams.core.filters import FilterSet
from streams.core.formats.spec import FormatError
from streams.core.ids import EventId
from streams.core.routes import RouteSpec
from streams.core.templating import ExpansionContext, TemplateError
from streams.edge.authorization.reauthorization import CHALLENGE_FRAME
from streams.edge.http.access import access_log
from streams.edge.http.counters import challenges_sent
from streams.edge.http.request import StreamRequest
from streams.edge.runtime import WorkerRuntime
from streams.edge.streaming.filtering import client_where, query_values
from streams.fanout.hub import TopicHub
from streams.fanout.kafka import KafkaUnavailable, TopicNotFound
from streams.fanout.planning import INITIAL_EARLIEST, INITIAL_SNAPSHOT, PositionError, StartPlan
from streams.fanout.sinks import Sink
from streams.fanout.subscriber import Subscriber, SubscriberOptions
from streams.selectors import topic_settings_async

logger = logging.getLogger("sluice.streams")


class HubStream:
    """A :class:`~streams.edge.streaming.source.StreamSource` over one hub subscription."""

    __slots__ = ("route", "request", "hub", "plan", "filters", "started", "sub")

    def __init__(
        self,
        route: RouteSpec,
        request: StreamRequest,
        hub: TopicHub,
        plan: StartPlan,
        filters: FilterSet,
        started: float,
    ) -> None:
        self.route = route
        self.request = request
        self.hub = hub
        self.plan: StartPlan | None = plan
        self.filters = filters
        self.started = started
        self.sub: Subscriber | None = None

    @property
    def closed(self) -> asyncio.Future[str]:
        assert self.sub is not None
        return self.sub.closed

    @property
    def close_reason(self) -> str | None:
        return self.sub.close_reason if self.sub is not None else None

    def on_closed(self, callback: Callable[[], object]) -> None:
        assert self.sub is not None
        self.sub.on_end(callback)

    def attach(self, sink: Sink) -> None:
        route = self.route
        options = SubscriberOptions(
            filters=self.filters,
            form=route.event_id,
            binary=route.binary,
            heartbeat_seconds=route.heartbeat_seconds,
            schema=route.schema,
            route=route.pattern.source,
            conflate=route.conflate,
        )
        self.sub = Subscriber(sink, options)
        access_log("open", route, self.request.scope, 200, self.started)
        plan, self.plan = self.plan, None  # the subscriber has what it needs of it
        assert plan is not None
        self.hub.subscribe(self.sub, plan, route.retry_ms)

    def end(self, reason: str) -> None:
        if self.sub is not None:
            self.hub.unsubscribe(self.sub)
            self.sub.end(reason)

    def challenge(self) -> None:
        if self.sub is not None and not self.sub.is_closed:
            challenges_sent.labels(self.route.pattern.source).inc()
            self.sub.sink.write(CHALLENGE_FRAME)

    def detach(self) -> None:
        sub = self.sub
        if sub is None:
            return
        self.hub.unsubscribe(sub)
        reason = sub.close_reason or CloseReason.CLIENT
        access_log(
            "close",
            self.route,
            self.request.scope,
            200,
            self.started,
            events=sub.events,
            sent_bytes=sub.bytes,
            reason=reason,
        )


async def hub_stream_open(
    runtime: WorkerRuntime,
    route: RouteSpec,
    params: dict[str, str],
    request: StreamRequest,
    started: float,
    principal: Principal | None,
    last: EventId | None,
    *,
    awaited: bool = False,
    multiplexed: bool = False,
) -> HubStream:
    """The hub stream of an admitted request, planned from ``last``; refusals as :class:`StreamError`.

    ``awaited``: the stream waited for its topic to be created, so, unless it asked for a
    position, it starts at the topic's beginning (what was produced meanwhile is new to it).
    ``multiplexed``: a member of a multiplexed stream (which takes no client filter).
    """
    since_ms = request.since_ms(allowed=route.allow_since)
    client = client_where(route, request, multiplexed=multiplexed)
    try:
        query = query_values(request)
        context = (
            ExpansionContext(params, identity=principal.identity, attributes=principal.attributes, query=query)
            if principal is not None
            else ExpansionContext(params, query=query)
        )
        topic, filters = route.resolve(context, client)
    except TemplateError as exc:
        raise InvalidParameter(str(exc)) from exc
    try:
        settings = await topic_settings_async(topic)
        hub = await runtime.hubs().hub(topic, settings.limits, settings.schema, settings.cluster, settings.formats)
        initial = INITIAL_EARLIEST if awaited and route.initial != INITIAL_SNAPSHOT else route.initial
        plan = await hub.plan(last=last, initial=initial, since_ms=since_ms)
    except TopicNotFound as exc:
        raise topic_missing(route, topic, settings.configured) from exc
    except KafkaUnavailable as exc:
        # The cause is logged once per cluster and cause (streams.fanout.diagnosis), not per request.
        raise KafkaNotAvailable(str(exc), cause=exc.cause, headers=[(b"retry-after", b"5")]) from exc
    except (ClusterError, FormatError) as exc:
        raise KafkaNotAvailable(str(exc), cause="configuration") from exc
    except PositionError as exc:
        raise InvalidLastEventId(str(exc)) from exc
    return HubStream(route, request, hub, plan, filters, started)


def topic_missing(route: RouteSpec, topic: str, has_row: bool) -> UnknownTopic:
    """The 404 of a topic Kafka does not have; a configured one (a Topic row, or the route's literal topic) may come."""
    if has_row or route.topic.is_literal:
        return UnknownTopic(
            f"topic {topic!r} is configured but does not exist in Kafka yet", topic=topic, configured=True
        )
    return UnknownTopic(f"topic {topic!r} does not exist", topic=topic)
