"""Per-stream compressors: each write decodes on its own (flushed), and the coding a client asked for."""

from __future__ import annotations

import zlib

import brotli
import pytest

from streams.core.compression import BROTLI, GZIP, BrotliEncoder, GzipEncoder, encoding_choose

EVENTS = [f'id: {n}\ndata: {{"match":"m-1","home":"Arsenal","score":[{n},0]}}\n\n'.encode() for n in range(20)]


def test_each_gzip_write_decodes_as_soon_as_it_is_written() -> None:
    encoder, decoder = GzipEncoder(), zlib.decompressobj(16 + zlib.MAX_WBITS)
    for event in EVENTS:
        assert decoder.decompress(encoder(event)) == event
    decoder.decompress(encoder.finish())
    assert decoder.eof


def test_each_brotli_write_decodes_as_soon_as_it_is_written() -> None:
    encoder, decoder = BrotliEncoder(), brotli.Decompressor()
    for event in EVENTS:
        assert decoder.process(encoder(event)) == event
    decoder.process(encoder.finish())
    assert decoder.is_finished()


@pytest.mark.parametrize("make", [GzipEncoder, BrotliEncoder])
def test_repeated_fields_shrink_and_no_compressor_before_the_first_write(make) -> None:
    encoder = make()
    assert all(getattr(encoder, slot) is None for slot in encoder.__slots__)
    sizes = [len(encoder(event)) for event in EVENTS]
    assert sum(sizes[1:]) < sum(len(event) for event in EVENTS[1:]) / 2


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        (b"", None),
        (b"identity", None),
        (b"gzip, deflate, br, zstd", BROTLI),
        (b"gzip", GZIP),
        (b"GZIP;q=0.5", GZIP),
        (b"br;q=0, gzip", GZIP),
        (b"br;q=0, gzip;q=0", None),
        (b"*", BROTLI),
        (b"*;q=0", None),
        (b"br;q=bogus, gzip", GZIP),
        (b"x-gzip", GZIP),
    ],
)
def test_accept_encoding_prefers_brotli_and_honours_q_zero(header: bytes | None, expected: object) -> None:
    assert encoding_choose(header) == expected
