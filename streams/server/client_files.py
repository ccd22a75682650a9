"""The browser client's files, served to pages of any origin.

A page imports ``sluice.js`` as a module script, and browsers fetch module scripts in
CORS mode: from another origin the import fails unless the answer carries
``Access-Control-Allow-Origin``. The files are public code and no request for them
carries credentials, so every origin gets ``*``, and ``Cross-Origin-Resource-Policy:
cross-origin`` lets pages that require it (COEP) load them too. Paths:

- ``/static/sluice/<file>``: the stable path, always the gateway's version
  (revalidated: ``no-cache`` with an ETag);
- ``/client/sluice@<version>/<file>``: one version, cached for a year (``immutable``),
  to be loaded with its Subresource Integrity hash;
- ``/client/sluice-client-<version>.tgz``: the npm package;
- ``/client/sluice.json``: the version, its URLs and integrity hashes.

A file the package does not ship under ``/static/sluice/`` is left to the static files.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

from streams.core.asgi import Receive, Scope, Send
from streams.core.errors import MethodNotAllowed, StreamError
from streams.edge.http.responses import empty_answer, send_error
from streams.server.client_package import PACKAGE_DIR, ClientFile, ClientPackage, package_read, package_signature

STATIC_PREFIX = "/static/sluice/"
CLIENT_PREFIX = "/client/"
MANIFEST = "sluice.json"

IMMUTABLE = b"public, max-age=31536000, immutable"
REVALIDATE = b"no-cache"
METHODS = b"GET, HEAD, OPTIONS"
PUBLIC_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    (b"cross-origin-resource-policy", b"cross-origin"),
    (b"x-content-type-options", b"nosniff"),
]
PREFLIGHT_MAX_AGE = b"86400"


class UnknownClientFile(StreamError):
    """A ``/client/`` path this gateway does not serve (another version, or no such file)."""

    status = 404
    code = "unknown_client_file"


class PackageOnDisk:
    """The package read from its directory, read again only when a file there changes."""

    def __init__(self, directory: Path = PACKAGE_DIR) -> None:
        self.directory = directory
        self.signature: tuple[tuple[str, int, int], ...] = ()
        self.package: ClientPackage | None = None

    def current(self) -> ClientPackage:
        signature = package_signature(self.directory)
        if self.package is None or signature != self.signature:
            self.package, self.signature = package_read(self.directory), signature
        return self.package


class ClientFiles:
    """ASGI app: answers the client's paths, passes every other request to ``fallback``."""

    def __init__(self, fallback: Callable[..., Awaitable[None]], source: PackageOnDisk | None = None) -> None:
        self.fallback = fallback
        self.source = source or PackageOnDisk()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith((STATIC_PREFIX, CLIENT_PREFIX)):
            await self.fallback(scope, receive, send)
            return
        package = self.source.current()
        try:
            found = client_file(package, path)
        except UnknownClientFile as error:
            await send_error(send, error)
            return
        if found is None:
            await self.fallback(scope, receive, send)
            return
        served, cache_control = found
        await client_answer(scope, send, served, cache_control)


def client_file(package: ClientPackage, path: str) -> tuple[ClientFile, bytes] | None:
    """The file at ``path`` and its Cache-Control; None to leave the path to the static files."""
    if path.startswith(STATIC_PREFIX):
        served = package.files.get(path.removeprefix(STATIC_PREFIX))
        return None if served is None else (served, REVALIDATE)
    name = path.removeprefix(CLIENT_PREFIX)
    if name == MANIFEST:
        body = json.dumps(package.manifest(CLIENT_PREFIX), indent=2).encode("utf-8") + b"\n"
        return ClientFile.of(MANIFEST, body), REVALIDATE
    if name == package.tarball_name:
        return package.tarball, IMMUTABLE
    version_dir = f"sluice@{package.version}/"
    if name.startswith(version_dir) and name.removeprefix(version_dir) in package.files:
        return package.files[name.removeprefix(version_dir)], IMMUTABLE
    raise UnknownClientFile(
        f"no client file {path}: this gateway serves {package.name} {package.version}"
        f" at {CLIENT_PREFIX}{version_dir} (see {CLIENT_PREFIX}{MANIFEST})",
        headers=PUBLIC_HEADERS,
    )


async def client_answer(scope: Scope, send: Send, served: ClientFile, cache_control: bytes) -> None:
    """GET and HEAD (304 when the ETag matches), a preflight's answer, or 405."""
    method = scope.get("method", "GET")
    headers = dict((name.lower(), value) for name, value in scope.get("headers", []))
    if method == "OPTIONS":
        allowed = [*PUBLIC_HEADERS, (b"access-control-allow-methods", METHODS), (b"allow", METHODS)]
        requested = headers.get(b"access-control-request-headers")
        if requested:
            allowed.append((b"access-control-allow-headers", requested))
        await empty_answer(send, 204, [*allowed, (b"access-control-max-age", PREFLIGHT_MAX_AGE)])
        return
    if method not in ("GET", "HEAD"):
        refusal = f"{method} is not allowed on the client's files: use GET or HEAD"
        await send_error(send, MethodNotAllowed(refusal, headers=[*PUBLIC_HEADERS, (b"allow", METHODS)]))
        return
    common = [*PUBLIC_HEADERS, (b"cache-control", cache_control), (b"etag", served.etag)]
    if served.etag in [tag.strip() for tag in headers.get(b"if-none-match", b"").split(b",")]:
        await empty_answer(send, 304, common)
        return
    length = str(len(served.body)).encode("ascii")
    head = [*common, (b"content-type", served.content_type), (b"content-length", length)]
    await send({"type": "http.response.start", "status": 200, "headers": head})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else served.body})
