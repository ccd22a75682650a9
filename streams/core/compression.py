"""Compressed streams: the encoding a client accepts, and one flushed compressor per stream.

An event stream is only worth compressing if every write leaves the compressor
whole: each write (an event, a batch of events, a heartbeat) is compressed and
*flushed*, so the browser can decode it at once and nothing waits in a buffer.
gzip flushes with ``Z_SYNC_FLUSH`` (an empty stored block, 4 to 5 bytes);
Brotli's flush ends the meta-block. Both keep their window across writes, which
is where the gain is: an event's field names were in the one before.

Memory is bounded by small windows: gzip with a 4 KiB window and ``memLevel``
5 holds some 37 KB per stream; Brotli at quality 5 with a 64 KiB window some
300 KB (its hash tables, allocated at the first write; tracemalloc does not see
them, they are C allocations). Both are allocated at the first write, not at
the stream's start (docs/operations.md, "Compression").
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Protocol

try:
    import brotli
except ImportError:  # pragma: no cover - in requirements-gateway.txt
    brotli = None

BROTLI_QUALITY = 5
BROTLI_LGWIN = 16
GZIP_LEVEL = 6
GZIP_WBITS = 12  # a 4 KiB window: SSE events repeat within a few events, not kilobytes
GZIP_MEMLEVEL = 5


class Encoder(Protocol):
    """One stream's compressor: each call compresses and flushes, ``finish`` ends the encoded stream."""

    def __call__(self, data: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class GzipEncoder:
    """gzip over zlib, flushed with ``Z_SYNC_FLUSH`` after every write."""

    __slots__ = ("_zlib",)

    def __init__(self) -> None:
        self._zlib: zlib._Compress | None = None

    def __call__(self, data: bytes) -> bytes:
        z = self._zlib
        if z is None:
            z = self._zlib = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + GZIP_WBITS, GZIP_MEMLEVEL)
        return z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        z, self._zlib = self._zlib, None
        if z is None:
            z = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + GZIP_WBITS, GZIP_MEMLEVEL)
        return z.flush(zlib.Z_FINISH)


class BrotliEncoder:
    """Brotli in text mode, flushed after every write."""

    __slots__ = ("_brotli",)

    def __init__(self) -> None:
        self._brotli: brotli.Compressor | None = None

    def _compressor(self) -> brotli.Compressor:
        b = self._brotli
        if b is None:
            b = self._brotli = brotli.Compressor(mode=brotli.MODE_TEXT, quality=BROTLI_QUALITY, lgwin=BROTLI_LGWIN)
        return b

    def __call__(self, data: bytes) -> bytes:
        b = self._compressor()
        return b.process(data) + b.flush()

    def finish(self) -> bytes:
        out = self._compressor().finish()
        self._brotli = None
        return out


@dataclass(frozen=True, slots=True)
class Encoding:
    """A content coding Sluice can send: its ``Content-Encoding`` token and its compressor."""

    token: bytes
    encoder: type[GzipEncoder] | type[BrotliEncoder]


GZIP = Encoding(b"gzip", GzipEncoder)
BROTLI = Encoding(b"br", BrotliEncoder)


def encoding_choose(accept_encoding: bytes | None) -> Encoding | None:
    """The coding to send for an ``Accept-Encoding`` header: Brotli when accepted (and installed), else gzip.

    A coding with ``q=0`` is refused; ``*`` accepts both. None: send the stream as it is.
    """
    if not accept_encoding:
        return None
    accepted: dict[str, float] = {}
    for part in accept_encoding.decode("latin-1").split(","):
        name, _, params = part.partition(";")
        name = name.strip().lower()
        if not name:
            continue
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value.strip())
                except ValueError:
                    quality = 0.0
        accepted[name] = quality
    star = accepted.get("*", 0.0)
    if brotli is not None and accepted.get("br", star) > 0:
        return BROTLI
    if accepted.get("gzip", accepted.get("x-gzip", star)) > 0:
        return GZIP
    return None
