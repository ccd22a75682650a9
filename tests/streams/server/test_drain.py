"""The drain's plan and the admission bucket, without a server."""

from __future__ import annotations

import pytest

from streams.core.errors import AdmissionsBusy
from streams.edge.http.admission_rate import AdmissionRate
from streams.server.shutdown import WAVE_SECONDS, drain_plan


def test_the_drain_window_is_taken_within_the_shutdown_time() -> None:
    assert drain_plan(3.0, 5.0) == (12, pytest.approx(WAVE_SECONDS))
    waves, spacing = drain_plan(30.0, 5.0)  # at most the shutdown time less a second
    assert waves * spacing == pytest.approx(4.0)
    assert drain_plan(0.0, 5.0) == (1, 0.0)  # every stream at once
    assert drain_plan(3.0, 0.5) == (1, 0.0)


def test_admissions_past_the_rate_get_503_with_retry_after() -> None:
    bucket = AdmissionRate(5)
    for _ in range(5):
        bucket.take()
    with pytest.raises(AdmissionsBusy) as refused:
        bucket.take()
    assert refused.value.status == 503
    assert (b"retry-after", b"1") in refused.value.headers
    assert (bucket.admitted, bucket.refused) == (5, 1)


def test_no_rate_admits_everything() -> None:
    bucket = AdmissionRate(0)
    for _ in range(10_000):
        bucket.take()
    assert bucket.admitted == 10_000


async def test_readyz_is_unavailable_at_once_while_draining() -> None:
    from streams.edge.runtime import WorkerRuntime
    from streams.ops.readiness import readiness

    runtime = WorkerRuntime("127.0.0.1:1")
    runtime.drain_begin(0.25)
    answer = await readiness(runtime)  # asks no dependency: no database, broker or channel layer here
    assert answer["status"] == "unavailable"
    assert answer["checks"]["draining"]["status"] == "down"
    assert 2000 <= runtime.drain_retry_ms(2000) <= 2250
