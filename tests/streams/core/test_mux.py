"""The multiplexed stream's pure parts: members, composite ids and relabelled frames (docs/multiplexing.md)."""

from __future__ import annotations

import base64
import json

import pytest

from streams.core.ids import MAX_EVENT_ID_BYTES, EventIdError, b64url_decode, progress_decode, progress_encode
from streams.core.mux.frames import MuxFramer, kafka_part, proxy_part
from streams.core.mux.ids import composite_decode, composite_encode
from streams.core.mux.members import MemberError, MemberSpec, members_parse
from tests.support.sse_client import EventParser

# -- members ------------------------------------------------------------------------------


def test_members_with_and_without_aliases() -> None:
    assert members_parse(["scores:/demo/scores", "/demo/leagues/liga", "n-1_x:/a:b"]) == [
        MemberSpec("scores", "/demo/scores"),
        MemberSpec("1", "/demo/leagues/liga"),
        MemberSpec("n-1_x", "/a:b"),
    ]


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ([], "name the routes"),
        (["/a"] * 17, "at most 16"),
        (["scores"], "neither /path nor alias:/path"),
        (["a.b:/x"], "is not 1 to 32"),
        (["x" * 33 + ":/x"], "is not 1 to 32"),
        (["challenge:/x"], "the stream's own events"),
        (["ended:/x"], "the stream's own events"),
        (["a:/x", "a:/y"], "given twice"),
        (["/x", "0:/y"], "given twice"),
    ],
)
def test_bad_members_are_named(values: list[str], says: str) -> None:
    with pytest.raises(MemberError, match=says):
        members_parse(values)


# -- composite ids ------------------------------------------------------------------------


def test_the_documented_example() -> None:
    first, second = b64url_decode("AQQAFAIE"), b64url_decode("AQIALA==")
    assert progress_decode("AQQAFAIE") == {0: 10, 1: 2}
    composite = composite_encode([first, second])
    assert composite == "AgYBBAAUAgQEAQIALA"
    assert base64.urlsafe_b64decode(composite + "==") == bytes.fromhex("02 06 010400140204 04 0102002c")
    assert composite_decode(composite, 2) == [first, second]


def test_round_trips_with_empty_and_long_parts() -> None:
    parts = [b"", b"x" * 127, b"y" * 128, "ü-7".encode(), b"z" * 300]
    assert composite_decode(composite_encode(parts), 5) == parts
    assert composite_decode(composite_encode([b"", b""]), 2) == [b"", b""]


@pytest.mark.parametrize(
    "bad",
    [
        "AQQAFAIE",  # a single route's id
        "Ag",  # version only: no member
        "AgYBBAAU",  # truncated part
        "AgoBBAAUAgQEAQIALA!",  # not base64url
        "Av____8P",  # a length that runs off the end
    ],
)
def test_malformed_composites_are_refused(bad: str) -> None:
    with pytest.raises(EventIdError):
        composite_decode(bad, 2)


def test_the_member_count_must_match() -> None:
    with pytest.raises(EventIdError, match="holds 2 member position"):
        composite_decode(composite_encode([b"", b""]), 3)


def test_over_long_ids_are_refused_before_decoding() -> None:
    with pytest.raises(EventIdError, match="longer than 1024"):
        composite_decode("A" * 1025, 1)


HIGHEST = 2**34 - 1  # the offsets the promise covers: below 2^34


@pytest.mark.parametrize(
    ("members", "partitions", "characters"), [(3, 12, 302), (8, 12, 802), (16, 6, 834), (8, 16, 1058)]
)
def test_the_size_table(members: int, partitions: int, characters: int) -> None:
    part = b64url_decode(progress_encode(dict.fromkeys(range(partitions), HIGHEST)))
    composite = composite_encode([part] * members)
    assert len(composite) == characters
    assert (len(composite) <= MAX_EVENT_ID_BYTES) == (members * partitions <= 96)


# -- frames -------------------------------------------------------------------------------


def framer(*kinds: str) -> MuxFramer:
    part_of = [kafka_part if kind == "kafka" else proxy_part for kind in kinds]
    return MuxFramer([f"m{i}" for i in range(len(kinds))], part_of, [b""] * len(kinds))


def test_events_are_relabelled_and_their_data_untouched() -> None:
    mux = framer("kafka", "proxy")
    written = b'id: AQQAFAIE\ndata: {"a": 1}\ndata:  two\n\nid: AQQAFgIE/etag-1\nevent: delete\ndata: a2V5\n\n'
    out = mux.frames(0, written)
    out += mux.frames(1, b"id: up-9\nevent: note\ndata: x\n\n")
    events = EventParser().feed(out)
    assert [(e.type, e.data) for e in events] == [("m0", '{"a": 1}\n two'), ("m0.delete", "a2V5"), ("m1.note", "x")]
    assert composite_decode(events[0].id or "", 2) == [b64url_decode("AQQAFAIE"), b""]
    assert composite_decode(events[1].id or "", 2) == [b64url_decode("AQQAFgIE"), b""]
    assert composite_decode(events[2].id or "", 2) == [b64url_decode("AQQAFgIE"), b"up-9"]


def test_key_form_ids_keep_their_progress() -> None:
    mux = framer("kafka")
    out = mux.frames(0, b'id: ["azI=","AQIABg=="]\ndata: v\n\n')
    assert composite_decode(EventParser().feed(out)[0].id or "", 1) == [b64url_decode("AQIABg==")]


def test_checkpoints_heartbeats_and_retry() -> None:
    mux = framer("kafka", "kafka")
    assert mux.preamble(2000) == f"retry: 2000\nid: {composite_encode([b'', b''])}\n\n".encode()
    # A member's own preamble: its retry is dropped, its start checkpoint moves the composite.
    moved = mux.frames(1, b"retry: 5000\nid: AQIABg==\n\n")
    assert moved == f"id: {mux.composite_id}\n\n".encode()
    assert mux.frames(1, b"retry: 5000\nid: AQIABg==\n\n") == b""  # the same position: nothing to say
    assert mux.frames(0, b":\n\n") == b":\n\n"
    assert mux.frames(0, b":\nid: AQIAAg==\n\n") == f":\nid: {mux.composite_id}\n\n".encode()


def test_ended_names_the_member_and_reason() -> None:
    mux = framer("kafka", "proxy")
    (event,) = EventParser().feed(mux.ended(1, "unauthorized"))
    assert event.type == "ended"
    assert json.loads(event.data) == {"member": "m1", "reason": "unauthorized"}
