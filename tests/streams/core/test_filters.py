"""Message filters (SPEC 2.1): ANY filter; within one, the key AND every header."""

from __future__ import annotations

from streams.core.filters import FilterSet, MessageFilter


def test_no_filters_pass_everything() -> None:
    filters = FilterSet()
    assert filters.accepts_all
    assert filters.matches(None, None)
    assert filters.matches(b"k", [("h", b"v")])


def test_empty_filter_matches_everything() -> None:
    filters = FilterSet((MessageFilter(),))
    assert not filters.accepts_all
    assert filters.matches(None, None)
    assert filters.matches(b"k", [("h", b"v")])


def test_key_filter() -> None:
    only = MessageFilter(key=b"k1")
    assert only.matches(b"k1", None)
    assert not only.matches(b"k2", None)
    assert not only.matches(None, None)
    assert not only.matches(b"k1x", None)
    assert not only.matches(b"", None)


def test_empty_key_is_a_key() -> None:
    assert MessageFilter(key=b"").matches(b"", None)
    assert not MessageFilter(key=b"").matches(None, None)


def test_header_filter() -> None:
    blue = MessageFilter(headers=(("tag", b"blue"),))
    assert blue.matches(None, [("tag", b"blue")])
    assert blue.matches(b"any", [("other", b"x"), ("tag", b"blue")])
    assert not blue.matches(None, [("tag", b"red")])
    assert not blue.matches(None, [("Tag", b"blue")])  # Kafka header names are case-sensitive
    assert not blue.matches(None, [("tag", None)])
    assert not blue.matches(None, [])
    assert not blue.matches(None, None)


def test_repeated_header_matches_if_any_value_does() -> None:
    blue = MessageFilter(headers=(("tag", b"blue"),))
    assert blue.matches(None, [("tag", b"red"), ("tag", b"blue")])


def test_all_headers_of_a_filter_must_match() -> None:
    both = MessageFilter(headers=(("tag", b"blue"), ("size", b"xl")))
    assert both.matches(None, [("size", b"xl"), ("tag", b"blue")])
    assert not both.matches(None, [("tag", b"blue")])
    assert not both.matches(None, [("size", b"xl")])
    assert not both.matches(None, [("tag", b"blue"), ("size", b"s")])


def test_key_and_headers_must_both_match() -> None:
    f = MessageFilter(key=b"k1", headers=(("tag", b"blue"),))
    assert f.matches(b"k1", [("tag", b"blue")])
    assert not f.matches(b"k2", [("tag", b"blue")])
    assert not f.matches(b"k1", [("tag", b"red")])
    assert not f.matches(b"k1", None)


def test_any_filter_of_a_set_passes_a_message() -> None:
    filters = FilterSet(
        (
            MessageFilter(key=b"k1"),
            MessageFilter(headers=(("tag", b"blue"),)),
            MessageFilter(key=b"k2", headers=(("tag", b"red"),)),
        )
    )
    assert filters.matches(b"k1", None)  # first
    assert filters.matches(b"zz", [("tag", b"blue")])  # second
    assert filters.matches(b"k2", [("tag", b"red")])  # third
    assert not filters.matches(b"k2", [("tag", b"green")])
    assert not filters.matches(b"k3", [("tag", b"red")])
    assert not filters.matches(None, None)
