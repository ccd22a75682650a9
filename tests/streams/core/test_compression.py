"""Per-stream compressors: each write decodes on its own (flushed), and the coding a client asked for."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from streams.core.compression import (
    BROTLI,
    BROTLI_LGWIN,
    BROTLI_QUALITY,
    BROTLI_REPLAY_BYTES,
    GZIP,
    BrotliEncoder,
    GzipEncoder,
    encoding_choose,
)
from streams.core.sse import HEARTBEAT

PREAMBLE = b"retry: 3000\nid: 0-1\n\n"
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


def test_a_gzip_stream_rests_after_its_preamble() -> None:
    encoder, decoder = GzipEncoder(), zlib.decompressobj(16 + zlib.MAX_WBITS)
    assert decoder.decompress(encoder(PREAMBLE)) == PREAMBLE
    assert encoder._zlib is None
    assert decoder.decompress(encoder(EVENTS[0])) == EVENTS[0]
    assert encoder._zlib is not None


def test_a_resting_brotli_stream_replays_its_writes_into_a_new_compressor_and_decodes_as_one_stream() -> None:
    encoder, decoder = BrotliEncoder(), brotli.Decompressor()
    # What one compressor that never rests writes for the same writes (heartbeats aside).
    reference = brotli.Compressor(mode=brotli.MODE_TEXT, quality=BROTLI_QUALITY, lgwin=BROTLI_LGWIN)
    checkpoint = b":\nid: 7\n\n"
    writes = [PREAMBLE, EVENTS[0], HEARTBEAT, HEARTBEAT, EVENTS[1], EVENTS[2], checkpoint, EVENTS[3]]
    for data in writes:
        out = encoder(data)
        # A heartbeat is a metadata block the decoder skips; the rest decodes as written.
        assert decoder.process(out) == (b"" if data == HEARTBEAT else data)
        if data != HEARTBEAT:
            assert out == reference.process(data) + reference.flush()
        resting = data in (PREAMBLE, HEARTBEAT, checkpoint)
        assert (encoder._brotli is None) == resting
    decoder.process(encoder.finish())
    assert decoder.is_finished()


def test_a_brotli_stream_past_its_replay_bytes_keeps_its_compressor() -> None:
    encoder, decoder = BrotliEncoder(), brotli.Decompressor()
    written = b""
    past = [PREAMBLE] + EVENTS * (BROTLI_REPLAY_BYTES // sum(map(len, EVENTS)) + 1)
    for data in [*past, HEARTBEAT]:
        written += b"" if data == HEARTBEAT else data
        assert decoder.process(encoder(data)) == (b"" if data == HEARTBEAT else data)
    assert len(written) > BROTLI_REPLAY_BYTES
    assert encoder._brotli is not None  # not resting after the heartbeat: its writes are no longer kept
    assert decoder.process(encoder(EVENTS[0])) == EVENTS[0]
    decoder.process(encoder.finish())
    assert decoder.is_finished()


@pytest.mark.parametrize("make", [GzipEncoder, BrotliEncoder])
def test_a_resting_stream_finishes_as_a_valid_stream(make) -> None:
    encoder = make()
    wire = encoder(PREAMBLE) + encoder(HEARTBEAT) + encoder.finish()
    if make is GzipEncoder:
        assert gzip.decompress(wire) == PREAMBLE + HEARTBEAT
    else:
        assert brotli.decompress(wire) == PREAMBLE


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
