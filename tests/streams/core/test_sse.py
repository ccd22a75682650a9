"""SSE framing (SPEC 1): exact bytes, and what a browser's parser makes of them."""

from __future__ import annotations

import pytest

from streams.core.sse import (
    CONTENT_TYPE,
    HEARTBEAT,
    checkpoint_frame,
    data_lines,
    event_body,
    event_frame,
    field_sanitize,
    preamble,
)
from tests.support.sse_client import EventParser


def test_constants() -> None:
    assert CONTENT_TYPE == b"text/event-stream; charset=utf-8"
    assert HEARTBEAT == b":\n\n"


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ("hello", b"data: hello\n"),
        ("a\nb", b"data: a\ndata: b\n"),
        ("a\r\nb", b"data: a\ndata: b\n"),
        ("a\rb", b"data: a\ndata: b\n"),
        ("a\r\rb", b"data: a\ndata: \ndata: b\n"),
        ("a\n\r\nb\r", b"data: a\ndata: \ndata: b\ndata: \n"),
        ("a\n", b"data: a\ndata: \n"),
        ("\n", b"data: \ndata: \n"),
        ("", b"data: \n"),
        (" lead", b"data:  lead\n"),
        ("  two\n three", b"data:   two\ndata:  three\n"),
        ("x: y", b"data: x: y\n"),
        ("caf\u00e9 \u2603", "data: caf\u00e9 \u2603\n".encode()),
    ],
)
def test_data_lines(payload: str, expected: bytes) -> None:
    assert data_lines(payload) == expected


@pytest.mark.parametrize(
    "payload",
    ["hello", "a\nb", "a\r\nb", "a\rb", "a\r\r\nb", "", " lead", "  ", "\n", "a\n", "\r\n\r\n", "id: x\nevent: y"],
)
def test_browser_sees_the_payload_with_every_line_end_as_lf(payload: str) -> None:
    [event] = EventParser().feed(event_frame("1", event_body(payload)))
    assert event.has_data
    assert event.type == "message"
    assert event.data == payload.replace("\r\n", "\n").replace("\r", "\n")


def test_event_body_without_type() -> None:
    assert event_body("x") == b"data: x\n\n"


def test_event_body_with_type() -> None:
    assert event_body("azE=", "delete") == b"event: delete\ndata: azE=\n\n"


def test_event_body_empty_payload_still_fires() -> None:
    assert event_body("") == b"data: \n\n"
    [event] = EventParser().feed(event_body(""))
    assert event.has_data
    assert event.data == ""


def test_event_type_is_sanitized() -> None:
    assert event_body("x", "de\r\nl\x00ete") == b"event: delete\ndata: x\n\n"


def test_event_frame_field_order() -> None:
    assert event_frame("AQQABAIC", event_body("a\nb", "update")) == (
        b"id: AQQABAIC\nevent: update\ndata: a\ndata: b\n\n"
    )


def test_event_frame_without_id() -> None:
    assert event_frame(None, b"data: x\n\n") == b"data: x\n\n"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [("AQQ\rABAIC", "AQQABAIC"), ("AQQ\nABAIC", "AQQABAIC"), ("AQQ\x00ABAIC", "AQQABAIC"), ("a\r\n\x00b", "ab")],
)
def test_ids_lose_cr_lf_nul(raw: str, clean: str) -> None:
    assert field_sanitize(raw) == clean
    assert event_frame(raw, b"data: x\n\n") == b"id: " + clean.encode() + b"\ndata: x\n\n"
    assert checkpoint_frame(raw) == b"id: " + clean.encode() + b"\n\n"


def test_unsanitized_etag_would_have_split_the_event() -> None:
    frame = event_frame("AQQABAIC/e\nevent: spoof", event_body("x"))
    [event] = EventParser().feed(frame)
    assert event.type == "message"
    assert event.id == "AQQABAIC/eevent: spoof"


def test_checkpoint_frame_is_id_only() -> None:
    frame = checkpoint_frame("AQIAAA==")
    assert frame == b"id: AQIAAA==\n\n"
    parser = EventParser()
    [event] = parser.feed(frame)
    assert not event.has_data
    assert parser.last_id == "AQIAAA=="


@pytest.mark.parametrize(
    ("retry", "event_id", "expected"),
    [
        (2000, "AQIAAA==", b"retry: 2000\nid: AQIAAA==\n\n"),
        (2000, None, b"retry: 2000\n\n"),
        (None, "AQIAAA==", b"id: AQIAAA==\n\n"),
        (None, None, b""),
        (0, "x\ny", b"retry: 0\nid: xy\n\n"),
    ],
)
def test_preamble(retry: int | None, event_id: str | None, expected: bytes) -> None:
    assert preamble(retry, event_id) == expected


def test_preamble_sets_retry_and_last_id_in_a_browser() -> None:
    parser = EventParser()
    [event] = parser.feed(preamble(2000, "AQIAAA=="))
    assert not event.has_data
    assert parser.retry == 2000
    assert parser.last_id == "AQIAAA=="
