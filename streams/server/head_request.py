"""daphne's request, started without Twisted's Deferreds for a request read whole with no body.

daphne's ``WebRequest.process`` is an ``inlineCallbacks`` generator that builds the ASGI scope and
``yield``s ``maybeDeferred(create_application)``: a generator, Deferreds and their callbacks for a
call that returns at once, about a twentieth of a worker's event loop in a storm of stream
requests (docs/benchmarks.md). :class:`HeadRequest` does what that method does, in order, with the
same checks and the same scope, calling ``create_application`` directly, for the requests
:class:`~streams.server.request_head.HeadChannel` read whole (no body). Anything else it hands to
daphne's ``process`` unchanged: an ``Upgrade`` header (websockets), addresses taken from proxy
headers, a root path header, a header daphne refuses, a path or query string that is not ASCII
(daphne answers each refusal), and every request with a body.
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any
from urllib.parse import unquote

from daphne.http_protocol import WebRequest
from daphne.utils import HEADER_NAME_RE, INVALID_HEADER_VALUE_BYTES

logger = logging.getLogger("sluice.streams")

ROOT_PATH_HEADER = b"daphne-root-path"
NO_BODY = {"type": "http.request", "body": b"", "more_body": False}


class HeadRequest(WebRequest):
    """daphne's ``WebRequest``; a request with no body and nothing unusual starts without Deferreds."""

    whole_head = False  # set by the channel that read the head whole (and no body)

    def process(self) -> Any:
        if not self.whole_head:
            return super().process()
        headers = self._headers_clean()
        if headers is None or self.server.proxy_forwarded_address_header or not hasattr(self.client, "port"):
            return super().process()
        path = self.path
        query = self.uri.split(b"?", 1)[1] if b"?" in self.uri else b""
        if not path.isascii() or not query.isascii():
            return super().process()  # daphne's 400
        try:
            self.request_start = time.time()
            self.client_addr = [str(self.client.host), self.client.port]
            self.server_addr = [str(self.host.host), self.host.port]
            self.client_scheme = "https" if self.isSecure() else "http"
            self.query_string = query
            self.root_path = self.server.root_path
            self.clean_headers = headers
            scope = {
                "type": "http",
                "http_version": self.clientproto.split(b"/")[-1].decode("ascii"),
                "method": self.method.decode("ascii"),
                "path": unquote(path.decode("ascii")),
                "raw_path": path,
                "root_path": self.root_path,
                "scheme": self.client_scheme,
                "query_string": query,
                "headers": headers,
                "client": self.client_addr,
                "server": self.server_addr,
            }
            self.application_queue = self.server.create_application(self, scope)
            if self.application_queue is None or self.content.closed:
                return None  # the request was abandoned meanwhile
            self.application_queue.put_nowait(dict(NO_BODY))
        except Exception:
            logger.error(traceback.format_exc())
            self.basic_error(500, b"Internal Server Error", "Daphne HTTP processing error")
        return None

    def _headers_clean(self) -> list[tuple[bytes, bytes]] | None:
        """The scope's headers as daphne makes them; None where daphne's own ``process`` must decide."""
        clean: list[tuple[bytes, bytes]] = []
        for name, values in self.requestHeaders.getAllRawHeaders():
            if not HEADER_NAME_RE.fullmatch(name):
                return None
            lower = name.lower()
            if lower in (b"upgrade", ROOT_PATH_HEADER):
                return None
            for value in values:
                if INVALID_HEADER_VALUE_BYTES.intersection(value):
                    return None
            if b"_" in name:
                continue  # daphne drops them (CVE-2015-0219)
            clean.extend((lower, value) for value in values)
        return clean
