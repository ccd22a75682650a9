"""Import of a Zilla ``zilla.yaml``.

Zilla describes a gateway as a graph of bindings (tcp -> tls -> http -> sse ->
sse-kafka -> kafka ...). Sluice is the whole graph in one process, so the
translation walks the graph to find what reaches each route: the http server
in front gives the request path, credentials and CORS policy; the sse server
route gives the guard and roles; an sse client chain gives the upstream URL.
Everything else (listeners, TLS, vaults, filesystems, telemetry, Kafka
connection settings) is reported as skipped with its YAML path.

Path patterns carry over as they are: Zilla's ``when.path`` ``/{topic}`` and
``${params.topic}`` in ``with`` are Sluice's pattern and template syntax.
"""

from streams.config.zilla.translate import zilla_translate

__all__ = ["zilla_translate"]
