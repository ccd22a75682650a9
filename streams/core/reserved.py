"""Sluice's own endpoints, which no route may take (SPEC 2.1).

A probe of ``/healthz`` must reach the health check even when a route
``/{topic}`` exists, or a Kubernetes liveness probe restarts the gateway
forever. So the rule has two halves:

- a route whose first path segment is literal and names one of these
  endpoints (``/metrics``, ``/admin/{x}``) is refused when it is written;
- a general pattern (``/{topic}``, ``*``) is accepted, but the request paths
  of these endpoints never reach it: :meth:`ReservedEndpoints.endpoint` is
  asked before the route table.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.core.patterns import PathPattern

# Paths answered by Sluice itself, exactly.
RESERVED_PATHS = ("/", "/healthz", "/readyz", "/metrics", "/asyncapi.json", "/favicon.ico", "/streams")
# Path prefixes answered by Sluice itself (the prefix without its slash too: Django redirects it).
RESERVED_PREFIXES = ("/admin/", "/api/", "/auth/", "/client/", "/viewer/")


@dataclass(frozen=True, slots=True)
class ReservedEndpoints:
    """The request paths Sluice answers itself; ``static`` is the static files' URL prefix."""

    paths: tuple[str, ...] = RESERVED_PATHS
    prefixes: tuple[str, ...] = RESERVED_PREFIXES

    @classmethod
    def with_static(cls, static_url: str) -> ReservedEndpoints:
        """These endpoints and the static files under ``static_url`` (``static/`` or ``/static/``)."""
        if static_url.startswith(("http://", "https://", "//")):
            return cls()  # served elsewhere: nothing to reserve here
        prefix = "/" + static_url.strip("/") + "/"
        return cls(prefixes=(*RESERVED_PREFIXES, prefix))

    def endpoint(self, path: str) -> str | None:
        """The endpoint a request for ``path`` belongs to (``/metrics``, ``/admin/``), or None."""
        if path in self.paths:
            return path
        for prefix in self.prefixes:
            if path.startswith(prefix) or path == prefix[:-1]:
                return prefix
        return None

    def conflict(self, pattern: PathPattern) -> str | None:
        """The endpoint a route pattern with a literal first segment would take, or None.

        Patterns whose first segment holds a parameter or ``*`` are general: they
        are accepted and the endpoints are kept from them at request time.
        """
        if not _first_segment_literal(pattern.source):
            return None
        for path in self.paths:
            if pattern.match(path) is not None:
                return path
        for prefix in self.prefixes:
            if any(pattern.match(probe) is not None for probe in _prefix_probes(pattern.source, prefix)):
                return prefix
        return None

    def shadowed(self, pattern: PathPattern) -> tuple[str, ...]:
        """The endpoints a general pattern could match, which requests for never reach it."""
        out = [path for path in self.paths if pattern.match(path) is not None]
        for prefix in self.prefixes:
            if any(pattern.match(probe) is not None for probe in _prefix_probes(pattern.source, prefix)):
                out.append(prefix)
        return tuple(out)


def _first_segment_literal(source: str) -> bool:
    first = source[1:].split("/", 1)[0]
    return "{" not in first and "*" not in first


def _prefix_probes(source: str, prefix: str) -> tuple[str, ...]:
    """Request paths under ``prefix`` shaped like ``source`` (same depth), to ask the pattern about."""
    depth = source.count("/")
    under = prefix + "/".join(["x"] * max(1, depth - prefix.count("/") + 1))
    return (prefix[:-1], prefix, under, prefix + "x")


RESERVED = ReservedEndpoints()
