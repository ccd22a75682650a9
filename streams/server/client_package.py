"""The browser client as a package: its files, their integrity hashes and its npm tarball.

The package is ``streams/static/sluice/``: ``package.json`` names it, its version and
the files it ships. The tarball is built here rather than by ``npm pack`` so that a
gateway needs no node: it has npm's layout (every member under ``package/``) and is
byte-for-byte the same for the same files (fixed mtimes, owners and modes, gzip
without a timestamp), so its ``integrity`` in a lockfile stays valid.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "static" / "sluice"

# npm pack's own fixed mtime (1985-10-26T08:15:00Z): what an npm-made tarball of the files would carry.
TARBALL_MTIME = 499162500

CONTENT_TYPES = {
    ".js": b"text/javascript; charset=utf-8",
    ".mjs": b"text/javascript; charset=utf-8",
    ".ts": b"application/typescript; charset=utf-8",
    ".json": b"application/json",
    ".md": b"text/markdown; charset=utf-8",
    ".tgz": b"application/gzip",
}


def integrity(body: bytes, algorithm: str = "sha384") -> str:
    """The Subresource Integrity value of ``body`` (``sha384-<base64>``; npm's lockfiles use sha512)."""
    digest = hashlib.new(algorithm, body).digest()
    return f"{algorithm}-{base64.b64encode(digest).decode('ascii')}"


@dataclass(frozen=True)
class ClientFile:
    """One file as served: its bytes, type, ETag and SRI hash."""

    body: bytes
    content_type: bytes
    etag: bytes
    integrity: str

    @classmethod
    def of(cls, name: str, body: bytes) -> ClientFile:
        sri = integrity(body)
        content_type = CONTENT_TYPES.get(Path(name).suffix, b"application/octet-stream")
        # The hash is the ETag: a weak validator would not let a byte-identical copy answer 304.
        return cls(body, content_type, f'"{sri[7:39]}"'.encode("ascii"), sri)


@dataclass(frozen=True)
class ClientPackage:
    """The package at one moment: name, version, its files by relative path, and its tarball."""

    name: str
    version: str
    files: dict[str, ClientFile]
    tarball: ClientFile

    @property
    def tarball_name(self) -> str:
        """npm's name for the tarball: ``@sluice/client`` 1.1.0 is ``sluice-client-1.1.0.tgz``."""
        return f"{self.name.lstrip('@').replace('/', '-')}-{self.version}.tgz"

    def manifest(self, prefix: str) -> dict[str, object]:
        """What a page or a build needs to pin this version: URLs under ``prefix`` and integrity hashes."""
        versioned = f"{prefix}sluice@{self.version}/"
        return {
            "name": self.name,
            "version": self.version,
            "module": f"{versioned}sluice.js",
            "files": {
                name: {"url": f"{versioned}{name}", "integrity": served.integrity}
                for name, served in sorted(self.files.items())
            },
            "tarball": {
                "url": f"{prefix}{self.tarball_name}",
                "integrity": integrity(self.tarball.body, "sha512"),
            },
        }


def package_files(directory: Path) -> list[str]:
    """The package's files, relative to ``directory``: ``package.json`` and its ``files`` (files, not globs)."""
    declared = json.loads((directory / "package.json").read_bytes())
    return sorted({"package.json", *declared.get("files", [])})


def package_signature(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """Changes whenever a file of the directory does: reloading is needed only then."""
    return tuple(
        (str(path.relative_to(directory)), stat.st_mtime_ns, stat.st_size)
        for path in sorted(directory.rglob("*"))
        if path.is_file() and (stat := path.stat())
    )


def package_read(directory: Path = PACKAGE_DIR) -> ClientPackage:
    """The package as it is on disk now."""
    declared = json.loads((directory / "package.json").read_bytes())
    bodies = {name: (directory / name).read_bytes() for name in package_files(directory)}
    return ClientPackage(
        name=declared["name"],
        version=declared["version"],
        files={name: ClientFile.of(name, body) for name, body in bodies.items()},
        tarball=ClientFile.of("package.tgz", package_tarball(bodies)),
    )


def package_tarball(bodies: dict[str, bytes]) -> bytes:
    """A gzipped tar in npm's layout (``package/<name>``), the same bytes for the same files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(bodies):
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(bodies[name])
            info.mtime = TARBALL_MTIME
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(bodies[name]))
    return gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0)
