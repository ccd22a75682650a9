"""A request's part in a stream's filters: the client's ``?where=`` and the query parameters a route's reads.

A client filter is taken only on a route's own path, and only by a route that
opts in (``client_filter``); anywhere else ``?where=`` is refused rather than
ignored, so a page never believes it narrowed what it did not.
"""

from __future__ import annotations

from streams.core.errors import InvalidFilter
from streams.core.routes import RouteSpec
from streams.core.where import WhereError, client_where_parse
from streams.core.where.syntax import Node
from streams.edge.http.request import StreamRequest

WHERE_PARAMETER = "where"


def client_where(route: RouteSpec, request: StreamRequest, *, multiplexed: bool) -> Node | None:
    """The client's filter for ``route`` (None: it gave none); :class:`InvalidFilter` with the position."""
    values = request.query.get(WHERE_PARAMETER)
    if not values:
        return None
    if multiplexed:
        raise InvalidFilter("?where= is taken on a route's own path, not on a multiplexed stream")
    if not route.client_filter:
        raise InvalidFilter("this route takes no client filter (?where=)")
    if len(values) > 1:
        raise InvalidFilter("give one ?where= (combine conditions with and)")
    try:
        return client_where_parse(values[0])
    except WhereError as exc:
        raise InvalidFilter(f"?where=: {exc}", position=exc.position) from exc


def query_values(request: StreamRequest) -> dict[str, str]:
    """The first value of each query parameter, for a route's ``${query.NAME}`` placeholders."""
    return {name: values[0] for name, values in request.query.items() if values}
