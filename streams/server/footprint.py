"""What an open stream keeps of its HTTP request once the response head is out.

An idle stream is mostly daphne's and Twisted's objects for its connection: the request, its
channel and transport. Once the head is written (``streams.server.flow.RequestFlow``), what was
only needed to read the request and write the head is dropped, and their attribute dicts, grown
while the request was parsed (a dict never shrinks), are rebuilt at the size they need. Measured
with ``bench/connection_memory.py`` and ``bench/scale.py`` (docs/benchmarks.md, "Idle streams").
"""

from __future__ import annotations

from typing import Any

from twisted.web.http_headers import Headers

# Request attributes read by neither Twisted nor daphne once the head is out: the cookies and
# form arguments parsed from the request, its body (a BytesIO; Twisted treats an absent one as
# None), daphne's parts of the ASGI scope (the scope holds its own references) and the server's
# address. ``args`` and ``content`` fall back to their class's None.
REQUEST_DROPPED = (
    "received_cookies",
    "cookies",
    "args",
    "_parsePOSTFormSubmission",
    "content",
    "host",
    "server_addr",
    "query_string",
    "root_path",
    "client_scheme",
    "clean_headers",
)


def request_trim(request: Any, transport: Any) -> None:
    """Drop what an open response no longer reads from ``request``; compact it, its channel and ``transport``."""
    attributes = request.__dict__
    for name in REQUEST_DROPPED:
        attributes.pop(name, None)
    # Twisted reads neither the request's headers (the ASGI scope has its own list) nor the
    # response's (written already) again, but its access log formatter asks for a header at the end.
    request.requestHeaders = Headers()
    request.responseHeaders = Headers()
    attributes_compact(request)
    attributes_compact(request.channel)
    attributes_compact(transport)


def attributes_compact(instance: Any) -> None:
    """Rebuild ``instance``'s attribute dict at the size it needs, without entries that repeat its class's.

    An attribute whose value is the very object its class holds reads the same from the class.
    """
    defaults = _class_values(type(instance))
    instance.__dict__ = {
        name: value for name, value in instance.__dict__.items() if defaults.get(name, _ABSENT) is not value
    }


_ABSENT = object()
_defaults: dict[type, dict[str, Any]] = {}


def _class_values(cls: type) -> dict[str, Any]:
    """What each attribute name reads from ``cls`` (its MRO walked once per class, not once per attribute)."""
    values = _defaults.get(cls)
    if values is None:
        values = {}
        for owner in reversed(cls.__mro__):
            values.update(vars(owner))
        _defaults[cls] = values
    return values
