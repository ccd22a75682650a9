"""Checking event ids as positions: each data event moves exactly one partition by exactly one offset."""

from __future__ import annotations


def progress_advance(before: dict[int, int] | None, after: dict[int, int], event_id: str) -> tuple[int, int]:
    """The ``(partition, offset)`` a data event delivered, from the progress before it and the one its id carries."""
    assert before is not None, "a data event before the start checkpoint"
    moved = {p: o for p, o in after.items() if before.get(p) != o}
    assert len(moved) == 1, f"id {event_id} moves {moved} from {before}"
    [(partition, next_offset)] = moved.items()
    assert next_offset == before[partition] + 1, f"gap or repeat in partition {partition}"
    return partition, next_offset - 1
