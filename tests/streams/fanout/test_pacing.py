"""The fetch wait of a topic (streams.fanout.pacing): records far apart, a fetch behind the log's end."""

from __future__ import annotations

from streams.fanout.pacing import (
    ANSWERING_WAIT_MS,
    BEHIND_RECORDS,
    CHANGE_SECONDS,
    LOADED_WAIT_MS,
    QUIET_SECONDS,
    SPARSE_FETCHES,
    SPARSE_POLLS,
    STREAK_FETCHES,
    WAIT_STEPS_MS,
    FetchWait,
    sparse_wait_ms,
)


def records_every(wait: FetchWait, start: float, gap: float, count: int) -> list[int | None]:
    """One record per fetch, ``gap`` seconds apart from ``start`` on: each fetch's answer."""
    return [wait.when_records(start + n * gap, 1) for n in range(count)]


def test_the_sparse_wait_is_a_bounded_fraction_of_the_gap() -> None:
    assert sparse_wait_ms(1.0, 1, 100) == 50  # 1 msg/s: 20 fetches a record, not 1,000
    assert sparse_wait_ms(0.1, 1, 100) == 5  # 10 msg/s
    assert sparse_wait_ms(0.02, 1, 100) == 1  # 50 msg/s and more: the short wait
    assert sparse_wait_ms(0.01, 1, 100) == 1
    assert sparse_wait_ms(0.02, 2, 100) == 2  # never below the short wait ...
    assert sparse_wait_ms(60.0, 1, 100) == ANSWERING_WAIT_MS  # ... nor above the quiet one
    for gap in (0.05, 0.2, 0.5, 0.9, 1.0, 1.3):
        wait_ms = sparse_wait_ms(gap, 1, 100)
        assert wait_ms <= gap * 1000 / SPARSE_FETCHES  # a record waits no longer than a fraction of its gap
        assert gap * 1000 / wait_ms <= SPARSE_FETCHES * 2.5  # and costs a bounded number of empty fetches
        assert wait_ms in WAIT_STEPS_MS


def test_records_a_second_apart_lengthen_the_wait_after_a_few_fetches() -> None:
    wait = FetchWait(1)
    wait.when_started(0.0)
    changes = records_every(wait, 1.0, 1.0, SPARSE_POLLS)
    assert changes[:-1] == [None] * (SPARSE_POLLS - 1)  # one long gap is not yet a pace
    assert changes[-1] == 50
    assert wait.when_idle(SPARSE_POLLS + 0.5) is None  # between records: no change
    assert records_every(wait, SPARSE_POLLS + 1.0, 1.0, 10) == [None] * 10  # steady: the consumer is kept


def test_records_coming_closer_bring_the_short_wait_back_at_once() -> None:
    wait = FetchWait(1)
    wait.when_started(0.0)
    records_every(wait, 1.0, 1.0, SPARSE_POLLS)
    assert wait.current_ms == 50
    now = SPARSE_POLLS + 0.05  # within CHANGE_SECONDS of the change: still at once
    assert now - wait.changed_at < CHANGE_SECONDS
    assert wait.when_records(now, 5) == 1  # five records in one 50 ms fetch: 100 msg/s
    assert records_every(wait, now + 0.01, 0.01, 100) == [None] * 100  # 100 msg/s keeps the short wait
    wait = FetchWait(1)
    wait.when_started(0.0)
    records_every(wait, 1.0, 1.0, SPARSE_POLLS)
    assert wait.when_records(SPARSE_POLLS + 0.1, 1) == 5  # one record 100 ms after the last: 10 msg/s


def test_fifty_records_a_second_keep_the_short_wait() -> None:
    wait = FetchWait(1)
    wait.when_started(0.0)
    assert records_every(wait, 0.02, 0.02, 500) == [None] * 500
    assert wait.current_ms == 1


def test_the_wait_lengthens_again_within_seconds_of_the_load_falling() -> None:
    wait = FetchWait(1)
    wait.when_started(0.0)
    records_every(wait, 0.01, 0.01, 1000)  # 10 s at 100 msg/s
    changes = records_every(wait, 11.0, 1.0, SPARSE_POLLS)
    assert changes[-1] == 50  # nothing kept from the load: the sparse wait after SPARSE_POLLS records


def test_a_topic_quieter_than_the_quiet_clock_is_never_remade() -> None:
    gap = QUIET_SECONDS * 1.25
    wait = FetchWait(1)
    wait.when_started(0.0)
    records_every(wait, gap, gap, SPARSE_POLLS)
    assert wait.current_ms == ANSWERING_WAIT_MS
    answers = []
    for n in range(SPARSE_POLLS + 1, SPARSE_POLLS + 10):
        answers.append(wait.when_idle(n * gap - 0.1))  # quiet between records: the wait it has already
        answers.append(wait.when_records(n * gap, 1))  # and each record keeps it
    assert answers == [None] * len(answers)
    assert wait.current_ms == ANSWERING_WAIT_MS


def test_a_broker_that_answers_early_keeps_its_one_wait() -> None:
    wait = FetchWait(ANSWERING_WAIT_MS)
    wait.when_started(0.0)
    assert records_every(wait, 1.0, 1.0, 10) == [None] * 10
    assert records_every(wait, 11.0, 0.001, 10) == [None] * 10


def test_a_fetch_behind_the_log_end_takes_the_loaded_wait_at_once() -> None:
    wait = FetchWait(1)
    wait.when_started(0.0)
    assert wait.when_idle(QUIET_SECONDS) == ANSWERING_WAIT_MS  # quiet
    start = 10.0
    assert wait.when_records(start, 40) == 1  # a load begins: the short wait, at once
    now = start + CHANGE_SECONDS / 2  # within CHANGE_SECONDS of that change
    assert wait.when_measured(now, BEHIND_RECORDS - 1) is None  # a few records behind: not yet
    assert wait.when_measured(now, BEHIND_RECORDS) == LOADED_WAIT_MS  # falling behind: backs off at once
    assert wait.when_measured(now + 0.25, 10 * BEHIND_RECORDS) is None  # still behind: kept


def test_a_slow_answer_alone_waits_its_turn() -> None:
    wait = FetchWait(1)
    wait.when_started(0.0)
    wait.when_records(0.0, 1)
    wait.when_idle(QUIET_SECONDS)
    assert wait.when_records(10.0, 1) == 1
    assert wait.when_measured(10.1, 0, 12.0) is None  # level with the log's end: within CHANGE_SECONDS, no remake
    assert wait.when_measured(10.0 + CHANGE_SECONDS, 0) == 50  # then the broker's pace


def test_the_wait_is_short_again_once_the_fetch_has_caught_up() -> None:
    wait = FetchWait(1)
    wait.when_started(0.0)
    wait.when_records(0.0, 40)
    assert wait.when_measured(0.1, 5 * BEHIND_RECORDS) == LOADED_WAIT_MS
    now = 1.0
    assert wait.when_measured(now, 0) is None
    changes = [wait.when_records(now + n / 100, 1) for n in range(STREAK_FETCHES)]
    assert changes[-1] == 1  # caught up and the fetches bring few: the short wait, nothing held
