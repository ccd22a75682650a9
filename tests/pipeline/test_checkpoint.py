"""Which batch a query on a checkpoint runs again first, read from the checkpoint's logs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.checkpoint import batch_replayed


def logs_write(root: Path, offsets: list[int], commits: list[int]) -> None:
    for log, ids in (("offsets", offsets), ("commits", commits)):
        (root / log).mkdir(parents=True, exist_ok=True)
        for batch in ids:
            (root / log / str(batch)).write_text("v1\n")
    (root / "offsets" / ".1.crc").write_text("")  # Hadoop's checksum files are not batches


def test_the_last_planned_batch_without_a_commit_is_replayed(spark: Any, tmp_path: Path) -> None:
    logs_write(tmp_path, offsets=[0, 1, 2], commits=[0, 1])
    assert batch_replayed(spark, str(tmp_path)) == 2


def test_nothing_is_replayed_when_every_batch_was_committed(spark: Any, tmp_path: Path) -> None:
    logs_write(tmp_path, offsets=[0, 1], commits=[0, 1])
    assert batch_replayed(spark, str(tmp_path)) is None


def test_a_first_batch_planned_but_never_committed_is_replayed(spark: Any, tmp_path: Path) -> None:
    logs_write(tmp_path, offsets=[0], commits=[])
    assert batch_replayed(spark, str(tmp_path)) == 0


def test_a_new_checkpoint_replays_nothing(spark: Any, tmp_path: Path) -> None:
    assert batch_replayed(spark, str(tmp_path / "new")) is None
