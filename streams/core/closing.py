"""Why a stream ended: the one list of close reasons (their values are what logs and metrics show)."""

from __future__ import annotations

from enum import StrEnum


class CloseReason(StrEnum):
    """The reason a stream (or one member of a multiplexed stream) ended."""

    CLIENT = "client"  # the client went away
    SLOW = "slow"  # cut for being too far behind: its connection is already dropped
    EXPIRED = "expired"  # the token's deadline passed without a challenge response
    UNAUTHORIZED = "unauthorized"  # live reconfiguration: the route's new rules refuse the client
    ROUTE_REMOVED = "route_removed"  # live reconfiguration: the route was disabled or deleted
    ENDED = "ended"  # every member of a multiplexed stream ended alone
    SHUTDOWN = "shutdown"  # the worker is stopping
    KAFKA = "kafka"  # a catch-up could not read Kafka
    UPSTREAM_REFUSED = "upstream_refused"  # an sse-proxy upstream refused to reopen
    UPSTREAM_CLOSED = "upstream_closed"  # an sse-proxy upstream ended for good


# Reasons that end one member of a multiplexed stream and let the others go on: it is not for this client now.
MEMBER_ALONE = frozenset({CloseReason.UNAUTHORIZED, CloseReason.ROUTE_REMOVED})
# Reasons whose connection is gone already: nothing more is written to it, not even the end of the response.
CONNECTION_GONE = frozenset({CloseReason.CLIENT, CloseReason.SLOW})
