"""Compressed streams: the encoding a client accepts, and one flushed compressor per stream.

An event stream is only worth compressing if every write leaves the compressor
whole: each write (an event, a batch of events, a heartbeat) is compressed and
*flushed*, so the browser can decode it at once and nothing waits in a buffer.
gzip flushes with ``Z_SYNC_FLUSH`` (an empty stored block, 4 to 5 bytes);
Brotli's flush ends the meta-block. Both keep their window across writes, which
is where the gain is: an event's field names were in the one before.

Memory is bounded by small windows: gzip with a 4 KiB window and ``memLevel``
5 holds some 37 KB per active stream, and about 1 KB once the stream is idle
(:class:`GzipEncoder`); Brotli at quality 5 with a 64 KiB window some 280 KB
(its hash tables, whatever the window; C allocations tracemalloc does not
see), and its stream cannot be continued by a new compressor, so it keeps them.
Both are allocated at the first write, not at the stream's start
(docs/operations.md, "Compression").
"""

from __future__ import annotations

import struct
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
    """gzip over zlib, flushed with ``Z_SYNC_FLUSH`` after every write, its compressor let go while idle.

    The gzip header and trailer are written here around raw deflate, so that after a
    heartbeat (a write starting with ``:``, sent only to a stream that was idle) the
    compressor can be dropped: after a sync flush the deflate stream is byte-aligned
    and a new raw compressor's blocks continue it. The new one is primed with the
    stream's last bytes (``zdict``, which the browser's decoder holds in its window),
    so the next event still finds the field names of the one before. An idle stream
    keeps its CRC, its length and those last bytes: about 1 KB instead of some 37 KB.
    """

    __slots__ = ("_zlib", "_crc", "_size", "_tail")

    def __init__(self) -> None:
        self._zlib: zlib._Compress | None = None
        self._crc = 0
        self._size = 0
        self._tail: bytes | None = None  # None: nothing written yet (the header is still due)

    def __call__(self, data: bytes) -> bytes:
        z = self._zlib
        head = b""
        if z is None:
            tail = self._tail
            if tail is None:
                head, tail = GZIP_HEADER, b""
            z = self._zlib = _deflate(tail)
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        out = head + z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
        if data[:1] == b":":
            # A heartbeat: the stream has been idle, let the compressor go until the next write.
            self._zlib = None
            self._tail = (self._tail + data)[-GZIP_REST_TAIL:] if self._tail else data[-GZIP_REST_TAIL:]
        else:
            self._tail = data[-GZIP_REST_TAIL:]
        return out

    def finish(self) -> bytes:
        head = GZIP_HEADER if self._tail is None else b""
        z = self._zlib or _deflate(self._tail or b"")
        self._zlib = None
        return head + z.flush(zlib.Z_FINISH) + struct.pack("<II", self._crc, self._size & 0xFFFFFFFF)


# gzip's fixed header: deflate, no name or time, "unknown" OS (RFC 1952 2.3).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# What an idle gzip stream keeps of its last bytes to prime the next compressor with.
GZIP_REST_TAIL = 1024


def _deflate(primer: bytes) -> zlib._Compress:
    """A raw deflate compressor continuing a stream whose last bytes were ``primer``."""
    if primer:
        return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -GZIP_WBITS, GZIP_MEMLEVEL, zdict=primer)
    return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -GZIP_WBITS, GZIP_MEMLEVEL)


class BrotliEncoder:
    """Brotli in text mode, flushed after every write.

    ``live`` counts the encoders in this process (a bound on the memory they hold: see
    ``BROTLI_MAX_STREAMS`` in streams/conf.py).
    """

    __slots__ = ("_brotli",)
    live = 0

    def __init__(self) -> None:
        self._brotli: brotli.Compressor | None = None
        BrotliEncoder.live += 1

    def __del__(self) -> None:
        BrotliEncoder.live -= 1

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


def encoding_choose(accept_encoding: bytes | None, *, brotli_ok: bool = True) -> Encoding | None:
    """The coding to send for an ``Accept-Encoding`` header: Brotli when accepted (and installed), else gzip.

    A coding with ``q=0`` is refused; ``*`` accepts both. None: send the stream as it is.
    ``brotli_ok`` False: gzip even if Brotli is accepted (the process holds its most Brotli streams).
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
    if brotli_ok and brotli is not None and accepted.get("br", star) > 0:
        return BROTLI
    if accepted.get("gzip", accepted.get("x-gzip", star)) > 0:
        return GZIP
    return None
