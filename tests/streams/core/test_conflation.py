"""The latest-per-key table behind conflated streams: what a stream is owed, tombstones, records without a key."""

from __future__ import annotations

from streams.core.conflation import LatestTable


def put(table: LatestTable, key: bytes | None, value: str, tombstone: bool = False) -> None:
    table.put(key, value.encode(), f"t{table.seq + 1}", tombstone)


def test_a_stream_is_owed_the_latest_record_of_each_key_that_changed_in_order_of_their_last_change() -> None:
    table = LatestTable()
    for key, value in [(b"a", "a1"), (b"b", "b1"), (b"a", "a2"), (b"c", "c1"), (b"b", "b2")]:
        put(table, key, value)
    owed = table.owed(0, 1 << 20)
    assert owed.frames == [b"a2", b"c1", b"b2"]
    assert (owed.upto, owed.token, owed.superseded) == (5, "t5", 2)
    # A stream written up to 3 missed c1 and b2 only; b1 (seq 2) it had.
    later = table.owed(3, 1 << 20)
    assert (later.frames, later.superseded) == ([b"c1", b"b2"], 0)
    assert table.owed(5, 1 << 20).frames == []


def test_tombstones_are_never_conflated_away_and_records_without_a_key_never_conflated() -> None:
    table = LatestTable()
    put(table, b"a", "a1")
    put(table, b"a", "gone", tombstone=True)  # replaces a1
    put(table, None, "x1")
    put(table, b"a", "a2")  # after the tombstone: both are sent
    put(table, None, "x2")
    put(table, b"a", "a3")  # replaces a2, not the tombstone
    owed = table.owed(0, 1 << 20)
    assert owed.frames == [b"gone", b"x1", b"x2", b"a3"]
    assert owed.superseded == 2


def test_a_budget_cuts_what_is_owed_and_the_rest_follows_from_where_it_stopped() -> None:
    table = LatestTable()
    for n in range(10):
        put(table, b"k%d" % n, f"v{n}")  # 2 bytes each
    first = table.owed(0, 7)
    assert first.frames == [b"v0", b"v1", b"v2"]
    assert (first.upto, first.token) == (3, "t3")
    put(table, b"k1", "w1")  # k1 changed again after it was sent: it is owed again, at the end
    second = table.owed(first.upto, 1 << 20)
    assert second.frames == [*(b"v%d" % n for n in range(3, 10)), b"w1"]
    assert table.owed(0, 0).frames == [b"v0"]  # one entry at least, whatever the budget


def test_prune_drops_what_every_stream_was_written_past_and_forgets_its_keys() -> None:
    table = LatestTable()
    put(table, b"a", "a1")
    put(table, b"b", "b1")
    put(table, b"a", "gone", tombstone=True)
    put(table, b"a", "a2")
    assert table.bytes == len(b"b1gonea2")
    table.prune(3)
    assert list(table.entries) == [4]
    assert table.bytes == 2
    assert table.latest == {b"a": 4}
    put(table, b"b", "b2")  # b was forgotten: nothing to replace
    assert table.owed(4, 1 << 20).frames == [b"b2"]
    table.prune(table.seq)
    assert (len(table), table.bytes, table.latest) == (0, 0, {})
