"""The progress codec and the id forms (SPEC 2.2), and every way an id can be malformed."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.core.ids import (
    MAX_EVENT_ID_BYTES,
    EventId,
    EventIdError,
    ProgressEncoder,
    b64url_decode,
    b64url_encode,
    event_id_parse,
    key_event_id,
    progress_decode,
    progress_encode,
)


def raw_token(data: bytes) -> str:
    """A progress token from hand-written bytes (to build malformed ones)."""
    return base64.urlsafe_b64encode(data).decode("ascii")


# -- the codec ---------------------------------------------------------------------


def test_spec_example_encodes_to_zilla_bytes() -> None:
    token = progress_encode({0: 2, 1: 1})
    assert token == "AQQABAIC"
    assert base64.urlsafe_b64decode(token) == bytes([0x01, 0x04, 0x00, 0x04, 0x02, 0x02])


def test_spec_example_decodes() -> None:
    assert progress_decode("AQQABAIC") == {0: 2, 1: 1}


def test_encode_sorts_partitions_and_accepts_pairs() -> None:
    assert progress_encode([(1, 1), (0, 2)]) == "AQQABAIC"
    assert progress_encode({1: 1, 0: 2}) == "AQQABAIC"


def test_encode_keeps_padding() -> None:
    token = progress_encode({0: 0})
    assert token == "AQIAAA=="
    assert progress_decode(token) == {0: 0}


@pytest.mark.parametrize(
    "progress",
    [
        {},
        {0: 0},
        {0: 63, 1: 64},  # the one-byte zig-zag varint boundary
        {0: 1, 1: 300, 2: 70_000},
        {7: 2**31, 1000: 2**40},
        {p: p * 1_000_003 for p in range(50)},
        {0: 2**62},
    ],
)
def test_round_trip(progress: dict[int, int]) -> None:
    assert progress_decode(progress_encode(progress)) == progress


def test_encoder_starts_as_the_codec_and_moves_one_partition() -> None:
    encoder = ProgressEncoder({1: 1, 0: 0})
    assert encoder.token == progress_encode({0: 0, 1: 1})
    encoder.move(0, 2)
    assert encoder.token == "AQQABAIC"
    encoder.move(1, 70_000)
    assert progress_decode(encoder.token) == {0: 2, 1: 70_000}
    with pytest.raises(KeyError):
        encoder.move(2, 0)  # not a partition of the position it was made with


@given(
    st.dictionaries(st.integers(0, 1000), st.integers(0, 2**62), max_size=8),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2**62)), max_size=20),
)
def test_encoder_agrees_with_the_codec_after_any_moves(start: dict[int, int], moves: list[tuple[int, int]]) -> None:
    encoder = ProgressEncoder(start)
    position = dict(start)
    partitions = sorted(start)
    for pick, offset in moves:
        if partitions:
            partition = partitions[pick % len(partitions)]
            encoder.move(partition, offset)
            position[partition] = offset
        assert encoder.token == progress_encode(position)


def test_decode_accepts_unpadded_tokens() -> None:
    assert progress_decode(progress_encode({0: 0}).rstrip("=")) == {0: 0}


# -- malformed progress tokens -------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        "AQQABAIC!",  # a character outside base64url
        "AQQ*ABAIC",
        "AQQA BAIC",
        "AQQA\tBAIC",
        "AQQA+BAI",  # the standard alphabet, not the url one
        "AQQA/BAI",
        "AQ==QABAIC",  # padding in the middle
        "AQQABAIC====",  # padding where none belongs
        "AQQABAIC=",
        "AQQABA=",  # padding that does not complete a quantum
        "A",  # one character cannot be base64 at all
        "AQQABAICé",
    ],
)
def test_bad_base64_is_rejected(token: str) -> None:
    with pytest.raises(EventIdError, match="base64url"):
        progress_decode(token)


@pytest.mark.parametrize("first", [0x00, 0x02, 0xFF])
def test_wrong_version_is_rejected(first: int) -> None:
    with pytest.raises(EventIdError, match="version"):
        progress_decode(raw_token(bytes([first, 0x04, 0x00, 0x04, 0x02, 0x02])))


def test_empty_token_is_rejected() -> None:
    with pytest.raises(EventIdError, match="version"):
        progress_decode("")


@pytest.mark.parametrize(
    "data",
    [
        bytes([0x01]),  # no count
        bytes([0x01, 0x80]),  # the count's varint never ends
        bytes([0x01, 0x04, 0x00]),  # partition without offset
        bytes([0x01, 0x04, 0x00, 0x04, 0x02]),  # second partition without offset
        bytes([0x01, 0x02, 0x00, 0xFF]),  # offset varint cut after a continuation byte
    ],
)
def test_truncated_token_is_rejected(data: bytes) -> None:
    with pytest.raises(EventIdError, match="truncated"):
        progress_decode(raw_token(data))


def test_over_long_varint_is_rejected() -> None:
    with pytest.raises(EventIdError, match="over-long"):
        progress_decode(raw_token(bytes([0x01, 0x02, 0x00]) + b"\xff" * 10 + b"\x00"))


def test_trailing_bytes_are_rejected() -> None:
    with pytest.raises(EventIdError, match="trailing"):
        progress_decode(raw_token(bytes([0x01, 0x04, 0x00, 0x04, 0x02, 0x02, 0x00])))


def test_duplicate_partition_is_rejected() -> None:
    with pytest.raises(EventIdError, match="twice"):
        progress_decode(raw_token(bytes([0x01, 0x04, 0x00, 0x04, 0x00, 0x02])))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (bytes([0x01, 0x01]), "partition count"),  # count -1
        (bytes([0x01, 0x02, 0x01, 0x00]), "negative"),  # partition -1
        (bytes([0x01, 0x02, 0x00, 0x03]), "negative"),  # offset -2
    ],
)
def test_negative_values_are_rejected(data: bytes, match: str) -> None:
    with pytest.raises(EventIdError, match=match):
        progress_decode(raw_token(data))


def test_impossible_partition_count_is_rejected() -> None:
    data = bytearray([0x01])
    value = 2_000_000 << 1  # zig-zag of a positive number
    while value >= 0x80:
        data.append((value & 0x7F) | 0x80)
        value >>= 7
    data.append(value)
    with pytest.raises(EventIdError, match="partition count"):
        progress_decode(raw_token(bytes(data)))


# -- base64url helpers -----------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"", b"k", b"k1", b"key", b"\xff\xfe\xfd\x00", "clé".encode()])
def test_b64url_round_trip_with_padding(raw: bytes) -> None:
    text = b64url_encode(raw)
    assert len(text) % 4 == 0
    assert "+" not in text
    assert "/" not in text
    assert b64url_decode(text) == raw
    assert b64url_decode(text.rstrip("=")) == raw


def test_b64url_uses_the_url_alphabet() -> None:
    assert b64url_encode(b"\xfb\xff") == "-_8="


# -- id forms ------------------------------------------------------------------------


def test_parse_plain_progress() -> None:
    assert event_id_parse("AQQABAIC") == EventId(progress={0: 2, 1: 1})


def test_parse_progress_with_etag() -> None:
    parsed = event_id_parse("AQQABAIC/v1")
    assert parsed.progress == {0: 2, 1: 1}
    assert parsed.etag == "v1"
    assert parsed.key is None


def test_parse_etag_may_hold_slashes() -> None:
    assert event_id_parse("AQQABAIC/a/b").etag == "a/b"


def test_parse_empty_etag_is_none() -> None:
    assert event_id_parse("AQQABAIC/").etag is None


def test_key_form_is_a_json_array_without_spaces() -> None:
    assert key_event_id(b"k1", "AQQABAIC") == '["azE=","AQQABAIC"]'
    assert key_event_id(None, "AQQABAIC") == '[null,"AQQABAIC"]'
    assert json.loads(key_event_id(b"k1", "AQQABAIC")) == ["azE=", "AQQABAIC"]


@pytest.mark.parametrize("key", [b"k1", b"", b"\x00\xff", None])
def test_key_form_round_trip(key: bytes | None) -> None:
    parsed = event_id_parse(key_event_id(key, "AQQABAIC"))
    assert parsed == EventId(progress={0: 2, 1: 1}, key=key)


def test_key_form_accepts_progress_with_etag() -> None:
    parsed = event_id_parse('["azE=","AQQABAIC/v1"]')
    assert parsed == EventId(progress={0: 2, 1: 1}, etag="v1", key=b"k1")


@pytest.mark.parametrize(
    "text",
    [
        "[",
        "[null,",
        "[]",
        '["azE="]',
        '[null,"AQQABAIC",null]',
        '[1,"AQQABAIC"]',
        "[null,2]",
        "[null,null]",
        '{"key":null}',
        '["azE=","AQQABAIC",]',
        '[null,"[null,\\"AQQABAIC\\"]"]',  # arrays do not nest
        '["a!b","AQQABAIC"]',  # key not base64url
        '[null,"AQQ*ABAIC"]',  # progress not base64url
        '[null,""]',
        '[null,"AgQABAIC"]',  # wrong version inside
    ],
)
def test_bad_key_form_is_rejected(text: str) -> None:
    with pytest.raises(EventIdError):
        event_id_parse(text)


def test_longest_allowed_id_parses() -> None:
    token = "AQQABAIC/"
    text = token + "e" * (MAX_EVENT_ID_BYTES - len(token))
    assert len(text) == MAX_EVENT_ID_BYTES
    assert event_id_parse(text).progress == {0: 2, 1: 1}


def test_id_over_1024_bytes_is_rejected() -> None:
    text = "AQQABAIC/" + "e" * (MAX_EVENT_ID_BYTES - 8)
    with pytest.raises(EventIdError, match="1024"):
        event_id_parse(text)


def test_id_limit_counts_utf8_bytes_not_characters() -> None:
    text = "AQQABAIC/" + "é" * 510  # 9 + 1020 bytes, but only 519 characters
    with pytest.raises(EventIdError, match="1024"):
        event_id_parse(text)


def test_deeply_nested_arrays_are_an_event_id_error() -> None:
    # Found by tests/fuzz: json.loads recursed out before failing to decode.
    with pytest.raises(EventIdError):
        event_id_parse("[" * 1000)
