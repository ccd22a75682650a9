"""Per-stream compressors: each write decodes on its own (flushed), and the coding a client asked for."""

from __future__ import annotations

import gzip
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
    assert getattr(encoder, encoder.__slots__[0]) is None
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


def test_an_idle_gzip_stream_lets_its_compressor_go_and_the_stream_stays_one_gzip_member() -> None:
    encoder, decoder = GzipEncoder(), zlib.decompressobj(16 + zlib.MAX_WBITS)
    written, wire = b"", b""
    for index, event in enumerate(EVENTS):
        for data in (event, b":\n\n") if index % 5 == 4 else (event,):
            out = encoder(data)
            assert decoder.decompress(out) == data
            written, wire = written + data, wire + out
        if index % 5 == 4:
            assert encoder._zlib is None  # resting after a heartbeat
    # Primed with the stream's last bytes, the first event after a rest still compresses well.
    out = encoder(EVENTS[0])
    assert len(out) < len(EVENTS[0]) / 2
    wire += out + encoder.finish()
    assert gzip.decompress(wire) == written + EVENTS[0]


@pytest.mark.parametrize("make", [GzipEncoder, BrotliEncoder])
def test_a_stream_finished_before_any_write_is_a_valid_empty_stream(make) -> None:
    wire = make().finish()
    assert (gzip.decompress(wire) if make is GzipEncoder else brotli.decompress(wire)) == b""


def test_brotli_encoders_are_counted_and_a_full_process_gives_gzip() -> None:
    before = BrotliEncoder.live
    encoders = [BrotliEncoder() for _ in range(3)]
    assert BrotliEncoder.live == before + 3
    del encoders
    assert BrotliEncoder.live == before
    assert encoding_choose(b"br, gzip", brotli_ok=False) == GZIP
    assert encoding_choose(b"br", brotli_ok=False) is None
