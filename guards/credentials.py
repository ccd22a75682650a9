"""Where a request carries its token: cookie, then header, then query (SPEC 4.1)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .policy import CredentialSources


def cookie_read(headers: Iterable[tuple[bytes, bytes]], name: str) -> str | None:
    """The value of cookie ``name`` from every ``cookie`` header (lenient: one bad pair spoils nothing)."""
    wanted = name.encode("latin-1")
    for header, value in headers:
        if header != b"cookie":
            continue
        for pair in value.split(b";"):
            key, sep, cookie = pair.strip().partition(b"=")
            if sep and key == wanted:
                text = cookie.strip().decode("latin-1")
                if len(text) >= 2 and text[0] == text[-1] == '"':
                    text = text[1:-1]
                return text
    return None


def header_read(headers: Iterable[tuple[bytes, bytes]], sources: CredentialSources) -> str | None:
    """The token inside the credentials header; the prefix (``Bearer ``) matches case-insensitively."""
    wanted = sources.header.encode("latin-1")
    prefix, suffix = sources.header_prefix.lower(), sources.header_suffix.lower()
    for header, raw in headers:
        if header != wanted:
            continue
        value = raw.decode("latin-1").strip()
        lowered = value.lower()
        if lowered.startswith(prefix) and lowered.endswith(suffix) and len(value) > len(prefix) + len(suffix):
            return value[len(prefix) : len(value) - len(suffix)].strip()
    return None


def credentials_read(
    sources: CredentialSources, headers: Iterable[tuple[bytes, bytes]], query: Mapping[str, list[str]]
) -> str | None:
    """The first token found, trying cookie, header, query; None if the request carries none."""
    headers = list(headers)
    if sources.cookie:
        token = cookie_read(headers, sources.cookie)
        if token:
            return token
    if sources.header:
        token = header_read(headers, sources)
        if token:
            return token
    if sources.query:
        values = query.get(sources.query)
        if values and values[0]:
            return values[0]
    return None
