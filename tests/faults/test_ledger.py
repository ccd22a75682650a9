"""The fault scenarios' ledger: what counts as Sluice repeating a record, and what as the producer writing it twice."""

from __future__ import annotations

import json

from streams.core.ids import progress_encode
from tests.faults.harness import PARTITIONS, ResumingClient, ledger_check


class Ledger:
    """What the producer's delivery reports said: seq 0..5, partition seq % 3, in order."""

    def expected(self, group: str | None) -> dict[int, list[int]]:
        return {p: [seq for seq in range(6) if seq % PARTITIONS == p] for p in range(PARTITIONS)}


def receive(client: ResumingClient, seq: int, offset: int) -> None:
    """One event as the gateway frames it: the record's progress id (its partition at offset + 1), then its data."""
    positions = dict.fromkeys(range(PARTITIONS), 0) | {seq % PARTITIONS: offset + 1}
    data = json.dumps({"seq": seq, "ts": 0})
    client._frame(f"id: {progress_encode(positions)}\ndata: {data}".encode())


def client_with(events: list[tuple[int, int]]) -> ResumingClient:
    client = ResumingClient(0, "/faults/x/all", None)
    for seq, offset in events:
        receive(client, seq, offset)
    return client


EVERYTHING = [(0, 0), (1, 0), (2, 0), (3, 1), (4, 1), (5, 1)]  # (seq, offset)


def test_everything_once_is_clean() -> None:
    verdict = ledger_check([client_with(EVERYTHING)], Ledger())  # type: ignore[arg-type]
    assert (verdict.messages, verdict.lost, verdict.duplicated, verdict.out_of_order) == (6, 0, 0, 0)
    assert verdict.written_twice == 0


def test_a_record_delivered_twice_is_a_duplicate() -> None:
    verdict = ledger_check([client_with([*EVERYTHING, (4, 1)])], Ledger())  # type: ignore[arg-type]
    assert (verdict.duplicated, verdict.written_twice) == (1, 0)


def test_a_record_the_producer_wrote_twice_is_two_records_each_delivered_once() -> None:
    # seq 4 is in partition 1 at offset 1 and, after a retry, again at offset 2.
    verdict = ledger_check([client_with([*EVERYTHING, (4, 2)])], Ledger())  # type: ignore[arg-type]
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order) == (0, 0, 0)
    assert verdict.written_twice == 1


def test_a_lost_record_is_counted() -> None:
    verdict = ledger_check([client_with(EVERYTHING[:-1])], Ledger())  # type: ignore[arg-type]
    assert (verdict.lost, verdict.duplicated) == (1, 0)
