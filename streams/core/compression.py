"""Compressed streams: the encoding a client accepts, and one flushed compressor per stream.

An event stream is only worth compressing if every write leaves the compressor
whole: each write (an event, a batch of events, a heartbeat) is compressed and
*flushed*, so the browser can decode it at once and nothing waits in a buffer.
gzip flushes with ``Z_SYNC_FLUSH`` (an empty stored block, 4 to 5 bytes);
Brotli's flush ends the meta-block. Both keep their window across writes, which
is where the gain is: an event's field names were in the one before.

A compressor is the bulk of a compressed stream's memory (C allocations
tracemalloc does not see): gzip with a 4 KiB window and ``memLevel`` 5 some
35 KB, Brotli at quality 5 some 270 KB at its first write and 700 KB once its
window has filled (its hash tables, whatever ``lgwin``). So neither is held by a
stream that is not writing: after its first write (the preamble) and after each
heartbeat (it has been idle for ``heartbeat_seconds``) a stream *rests*, and the
next event takes a compressor again (:class:`GzipEncoder`, :class:`BrotliEncoder`).
Measured per stream in docs/operations.md, "Compression" (``bench/compression.py``).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Protocol

from streams.core.sse import HEARTBEAT

try:
    import brotli
except ImportError:  # pragma: no cover - in requirements-gateway.txt
    brotli = None

BROTLI_QUALITY = 5
BROTLI_LGWIN = 16
# What a resting Brotli stream keeps to take a compressor again: every write so far, up to this many bytes.
BROTLI_REPLAY_BYTES = 2048
GZIP_LEVEL = 6
GZIP_WBITS = 12  # a 4 KiB window: SSE events repeat within a few events, not kilobytes
# 5: 2 gives the same bytes on SSE events and holds 11 KB less per writing stream, but costs 20 % more
# CPU per 1 KB event (26.7 against 22.1 us; 4 and 3: 24.5, 27.4): a resting stream holds none of it anyway.
GZIP_MEMLEVEL = 5


class Encoder(Protocol):
    """One stream's compressor: each call compresses and flushes, ``finish`` ends the encoded stream."""

    def __call__(self, data: bytes) -> bytes: ...

    def finish(self) -> bytes: ...


class GzipEncoder:
    """gzip over zlib, flushed with ``Z_SYNC_FLUSH`` after every write, its compressor let go while resting.

    The gzip header and trailer are written here around raw deflate, so that the compressor
    can be dropped between writes: after a sync flush the deflate stream is byte-aligned and
    a new raw compressor's blocks continue it. The new one is primed with the stream's last
    bytes (``zdict``, which the browser's decoder holds in its window), so the next event still
    finds the field names of the one before. A heartbeat (a write starting with ``:``) goes out
    as a stored block of its own and needs no compressor. A resting stream keeps its CRC, its
    length and those last bytes: about 1 KB instead of some 35 KB.
    """

    __slots__ = ("_zlib", "_crc", "_size", "_tail")

    def __init__(self) -> None:
        self._zlib: zlib._Compress | None = None
        self._crc = 0
        self._size = 0
        self._tail: bytes | None = None  # None: nothing written yet (the header is still due)

    def __call__(self, data: bytes) -> bytes:
        tail = self._tail
        head = GZIP_HEADER if tail is None else b""
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        if data[:1] == b":" and len(data) <= 0xFFFF:
            # A heartbeat: the stream has been idle. Its bytes as they are, the compressor let go.
            self._zlib = None
            out = head + stored_block(data)
        else:
            z = self._zlib
            if z is None:
                z = self._zlib = _deflate(tail or b"")
            out = head + z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)
            if tail is None:
                self._zlib = None  # the preamble: the stream rests until its first event
        self._tail = (tail + data)[-GZIP_REST_TAIL:] if tail else data[-GZIP_REST_TAIL:]
        return out

    def finish(self) -> bytes:
        head = GZIP_HEADER if self._tail is None else b""
        self._zlib = None
        return head + GZIP_LAST_BLOCK + struct.pack("<II", self._crc, self._size & 0xFFFFFFFF)


# gzip's fixed header: deflate, no name or time, "unknown" OS (RFC 1952 2.3).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# An empty final stored block (RFC 1951 3.2.4): BFINAL 1, BTYPE 00, padding, LEN 0, NLEN.
GZIP_LAST_BLOCK = b"\x01\x00\x00\xff\xff"
# What a resting gzip stream keeps of its last bytes to prime the next compressor with.
GZIP_REST_TAIL = 1024


def stored_block(data: bytes) -> bytes:
    """``data`` as one deflate stored block (BFINAL 0, BTYPE 00), for a stream that is byte-aligned."""
    return b"\x00" + struct.pack("<HH", len(data), len(data) ^ 0xFFFF) + data


def _deflate(primer: bytes) -> zlib._Compress:
    """A raw deflate compressor continuing a stream whose last bytes were ``primer``."""
    if primer:
        return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -GZIP_WBITS, GZIP_MEMLEVEL, zdict=primer)
    return zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -GZIP_WBITS, GZIP_MEMLEVEL)


class BrotliEncoder:
    """Brotli in text mode, flushed after every write, its compressor let go while resting.

    A Brotli stream cannot be continued by a new compressor primed with its last bytes as
    gzip's can (the decoder's last distances and context carry over between meta-blocks).
    But the encoder is deterministic: a new one given the same writes is in the same state.
    So while a stream has written at most ``BROTLI_REPLAY_BYTES``, it keeps those writes
    instead of a compressor, and the next event replays them into a new one (some 60 us
    plus 10 us a write, its output dropped: it was sent). Past that the compressor stays.

    A heartbeat is an empty metadata meta-block (RFC 7932 9.2), one byte the decoder skips:
    it keeps the connection alive and needs no compressor, but, unlike gzip's, decodes to
    nothing. A heartbeat that carries a checkpoint (``:\\n`` and an ``id:``) is compressed.

    ``live`` counts the encoders in this process (a bound on the memory they may hold: see
    ``BROTLI_MAX_STREAMS`` in streams/conf.py).
    """

    __slots__ = ("_brotli", "_writes", "_written")
    live = 0

    def __init__(self) -> None:
        self._brotli: brotli.Compressor | None = None
        # Every write so far while a replay could rebuild the compressor; None past BROTLI_REPLAY_BYTES.
        self._writes: list[bytes] | None = []
        self._written = 0
        BrotliEncoder.live += 1

    def __del__(self) -> None:
        BrotliEncoder.live -= 1

    def __call__(self, data: bytes) -> bytes:
        writes = self._writes
        if data == HEARTBEAT and self._written:
            if writes is not None:
                self._brotli = None
            return BROTLI_EMPTY_METADATA
        b = self._brotli
        if b is None:
            b = self._brotli = _brotli_new()
            for earlier in writes or ():
                b.process(earlier)
                b.flush()
        out = b.process(data) + b.flush()
        self._written += len(data)
        if writes is not None:
            if self._written > BROTLI_REPLAY_BYTES:
                self._writes = None
            else:
                writes.append(data)
                if len(writes) == 1 or data[:1] == b":":
                    self._brotli = None  # the preamble or a keep-alive: the stream rests
        return out

    def finish(self) -> bytes:
        if not self._written:
            return _brotli_new().finish()  # the stream header is due
        self._brotli = None
        return BROTLI_LAST_EMPTY


# After a flush a Brotli stream is byte-aligned between meta-blocks (RFC 7932 9.2):
# ISLAST 0, MNIBBLES 0 (metadata), reserved 0, MSKIPBYTES 0, padding.
BROTLI_EMPTY_METADATA = b"\x06"
# ISLAST 1, ISLASTEMPTY 1, padding: the end of the stream.
BROTLI_LAST_EMPTY = b"\x03"


def _brotli_new() -> brotli.Compressor:
    return brotli.Compressor(mode=brotli.MODE_TEXT, quality=BROTLI_QUALITY, lgwin=BROTLI_LGWIN)


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
