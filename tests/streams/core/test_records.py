"""Records as events: bodies, tombstones, binary values and the two id forms."""

from __future__ import annotations

from streams.core.ids import event_id_parse
from streams.core.records import BINARY_BASE64, BINARY_SKIP, ID_ETAG, ID_KEY, Record
from tests.support.sse_client import EventParser


def make(
    value: bytes | None, key: bytes | None = b"k1", headers: list[tuple[str, bytes | None]] | None = None
) -> Record:
    return Record(0, 5, 1_700_000_000_000, key, value, headers)


def test_text_body() -> None:
    assert make(b"hello").body() == b"data: hello\n\n"
    assert make(b"a\r\nb\rc\nd").body() == b"data: a\ndata: b\ndata: c\ndata: d\n\n"
    assert make(b"").body() == b"data: \n\n"
    assert make(b" lead").body() == b"data:  lead\n\n"
    assert make("caf\u00e9".encode()).body() == "data: caf\u00e9\n\n".encode()


def test_tombstone_is_a_delete_event_with_padded_base64url_key() -> None:
    record = make(None, key=b"k1")
    assert record.is_tombstone
    assert record.body() == b"event: delete\ndata: azE=\n\n"
    assert make(None, key=b"\xfb\xff").body() == b"event: delete\ndata: -_8=\n\n"
    assert make(None, key=b"key").body() == b"event: delete\ndata: a2V5\n\n"


def test_tombstone_without_key() -> None:
    assert make(None, key=None).body() == b"event: delete\ndata: \n\n"


def test_tombstone_whatever_the_binary_mode() -> None:
    assert make(None).body(BINARY_BASE64) == make(None).body(BINARY_SKIP)


def test_invalid_utf8_is_skipped() -> None:
    record = make(b"\xff\xfe not text")
    assert record.body() is None
    assert record.body(BINARY_SKIP) is None
    assert record.frame("AQIAAA==", ID_ETAG, BINARY_SKIP) is None


def test_invalid_utf8_as_base64() -> None:
    record = make(b"\xff\xfe")
    assert record.body(BINARY_BASE64) == b"data: __4=\n\n"
    assert record.body(BINARY_SKIP) is None  # each mode answers for itself


def test_valid_utf8_is_text_in_base64_mode() -> None:
    assert make(b"plain").body(BINARY_BASE64) == b"data: plain\n\n"


def test_etag_header_goes_into_the_id() -> None:
    record = make(b"x", headers=[("other", b"o"), ("etag", b"v1"), ("etag", b"v2")])
    assert record.etag == "v1"
    assert record.event_id("AQQABAIC", ID_ETAG) == "AQQABAIC/v1"
    assert record.frame("AQQABAIC", ID_ETAG, BINARY_SKIP) == b"id: AQQABAIC/v1\ndata: x\n\n"
    assert event_id_parse(record.event_id("AQQABAIC", ID_ETAG)).etag == "v1"


def test_without_etag_the_id_is_the_progress() -> None:
    assert make(b"x", headers=[("ETag", b"v1")]).event_id("AQQABAIC", ID_ETAG) == "AQQABAIC"
    assert make(b"x", headers=[("etag", None)]).event_id("AQQABAIC", ID_ETAG) == "AQQABAIC"


def test_etag_with_line_ends_cannot_break_the_frame() -> None:
    record = make(b"x", headers=[("etag", b"v1\r\nevent: spoof\x00")])
    frame = record.frame("AQQABAIC", ID_ETAG, BINARY_SKIP)
    assert frame == b"id: AQQABAIC/v1event: spoof\ndata: x\n\n"
    [event] = EventParser().feed(frame)  # type: ignore[arg-type]
    assert event.type == "message"
    assert event.data == "x"


def test_key_form_ids() -> None:
    assert make(b"x", key=b"k1").event_id("AQQABAIC", ID_KEY) == '["azE=","AQQABAIC"]'
    assert make(b"x", key=None).event_id("AQQABAIC", ID_KEY) == '[null,"AQQABAIC"]'
    # The key form carries the key instead of the etag.
    record = make(b"x", key=b"k1", headers=[("etag", b"v1")])
    assert record.frame("AQQABAIC", ID_KEY, BINARY_SKIP) == b'id: ["azE=","AQQABAIC"]\ndata: x\n\n'


def test_tombstone_frame() -> None:
    frame = make(None, key=b"k1").frame("AQIACg==", ID_ETAG, BINARY_SKIP)
    assert frame == b"id: AQIACg==\nevent: delete\ndata: azE=\n\n"


def test_live_frame_is_built_once_and_shared() -> None:
    record = make(b"x")
    record.progress_id = "AQIADA=="
    first = record.live_frame(ID_ETAG, BINARY_SKIP)
    assert first == b"id: AQIADA==\ndata: x\n\n"
    assert record.live_frame(ID_ETAG, BINARY_SKIP) is first
    assert record.live_frame(ID_KEY, BINARY_SKIP) == b'id: ["azE=","AQIADA=="]\ndata: x\n\n'
    assert record.live_frame(ID_ETAG, BINARY_SKIP) is first


def test_size_counts_key_value_and_headers() -> None:
    bare = make(b"", key=None).size
    # The value is held three times: raw, as the event body, and in the shared frame.
    assert make(b"12345", key=b"kk", headers=[("h", b"vvv")]).size == bare + 3 * 5 + 2 + 1 + 3


class FakeMessage:
    def partition(self) -> int:
        return 2

    def offset(self) -> int:
        return 41

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_123)

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"v"

    def headers(self) -> list[tuple[str, bytes]]:
        return [("etag", b"e")]


def test_from_kafka() -> None:
    record = Record.from_kafka(FakeMessage())
    assert (record.partition, record.offset, record.timestamp) == (2, 41, 1_700_000_000_123)
    assert (record.key, record.value, record.headers, record.etag) == (b"k", b"v", (("etag", b"e"),), "e")
