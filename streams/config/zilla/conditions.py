"""The http server's route conditions (``:path``, ``:method``) carried through to the routes behind it."""

from __future__ import annotations

import re
from typing import Any

from common.config.document import DocPath, Translation
from streams.config.zilla.graph import ZillaGraph, skip_once
from streams.core.patterns import PatternError, pattern_compile

# http route conditions Sluice routes cannot hold: Sluice serves every host, scheme and port it listens on.
CONDITION_SKIPS = {
    ":authority": "Sluice routes match paths only: every host name reaches them",
    ":scheme": "Sluice routes match paths only: http and https both reach them",
}


STREAM_METHODS = ("GET", "HEAD")


PARAM = re.compile(r"\$\{params\.([A-Za-z_][A-Za-z0-9_]*)\}")


def http_conditions(translation: Translation, graph: ZillaGraph, name: str) -> list[tuple[str, DocPath]] | None:
    """The ``:path`` values the http servers in front send on to ``name``, with their YAML paths.

    None when some http route reaches ``name`` without a ``:path`` condition (every path does). A
    ``when`` for a method a stream does not answer is left out; ``:authority``, ``:scheme`` and
    other headers are reported as skipped.
    """
    paths: list[tuple[str, DocPath]] = []
    every_path = not graph.upstream_of(name, ("http", "server"))
    for when_at, headers in graph.http_whens(name):
        for header in headers:
            if header not in (":path", ":method"):
                reason = CONDITION_SKIPS.get(header, "Sluice routes match paths only")
                skip_once(translation, (*when_at, header), reason)
        method = headers.get(":method")
        if isinstance(method, str) and method.upper() not in STREAM_METHODS:
            skip_once(translation, (*when_at, ":method"), f"streams answer GET: {method} is not served")
            continue
        path = headers.get(":path")
        if not isinstance(path, str):
            every_path = True
        elif all(path != known for known, _ in paths):
            paths.append((path, (*when_at, ":path")))
    return None if every_path else paths


def served_paths(
    translation: Translation, path: str, path_at: DocPath, served: list[tuple[str, DocPath]] | None
) -> list[tuple[str, DocPath, dict[str, str]]]:
    """The route paths to import for an sse-kafka ``path``, given the ``:path`` values the http server sends.

    A literal ``:path`` the pattern matches becomes a route of its own, its parameters filled in
    (``/{topic}`` behind ``:path: /events`` serves ``/events``, topic ``events``).
    """
    if served is None:
        return [(path, path_at, {})]
    try:
        pattern = pattern_compile(path)
    except PatternError:
        return [(path, path_at, {})]  # the route's own validation names the problem, at this line
    out: list[tuple[str, DocPath, dict[str, str]]] = []
    for served_path, served_at in served:
        if served_path == path:
            out.append((path, path_at, {}))
            continue
        params = pattern.match(served_path) if "{" not in served_path and "*" not in served_path else None
        if params is None:
            skip_once(translation, served_at, f"{served_path} does not reach the sse-kafka route {path}")
            continue
        out.append((served_path, served_at, params))
    if not out:
        translation.skip(path_at, "no path the http server sends on reaches this route")
    return out


def params_fill(value: Any, params: dict[str, str]) -> Any:
    """``${params.NAME}`` replaced by the value the served path gives it, in strings, lists and mappings."""
    if not params:
        return value
    if isinstance(value, str):
        return PARAM.sub(lambda m: params.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [params_fill(v, params) for v in value]
    if isinstance(value, dict):
        return {k: params_fill(v, params) for k, v in value.items()}
    return value
