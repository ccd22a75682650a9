"""Spark's workers re-read a zip archive on importlib.invalidate_caches() only when it changed."""

from __future__ import annotations

import importlib
import os
import sys
import zipfile
import zipimport
from collections.abc import Callable
from pathlib import Path

import pytest

from pipeline.spark_worker import invalidation_lazy, zip_invalidation_lazy


def archive_write(path: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, source in modules.items():
            archive.writestr(f"{name}.py", source)


class Rereads:
    """An original ``invalidate_caches`` that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, importer: zipimport.zipimporter) -> None:
        self.calls += 1


def lazily_invalidated(path: Path) -> tuple[Rereads, Callable[[], None]]:
    """Write an archive at ``path``: the counting original, and the lazy invalidation of its importer over it."""
    archive_write(path, {"first": "A = 1"})
    importer = zipimport.zipimporter(str(path))
    reread = Rereads()
    invalidate = invalidation_lazy(reread)
    return reread, lambda: invalidate(importer)


def test_an_unchanged_archive_is_not_read_again(tmp_path: Path) -> None:
    reread, invalidate = lazily_invalidated(tmp_path / "lib.zip")
    for _ in range(5):
        invalidate()
    assert reread.calls == 1  # the first call records the archive's size and time


def test_a_changed_or_missing_archive_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "lib.zip"
    reread, invalidate = lazily_invalidated(path)
    invalidate()
    archive_write(path, {"first": "A = 1", "second": "B = 2"})
    invalidate()
    assert reread.calls == 2
    path.unlink()
    invalidate()
    invalidate()
    assert reread.calls == 4  # nothing to compare with: always the original


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 re-reads lazily itself")
def test_installed_once_and_imports_still_see_a_replaced_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "lib.zip"
    archive_write(path, {"sluice_zip_first": "A = 1"})
    monkeypatch.syspath_prepend(str(path))
    zip_invalidation_lazy()
    installed = zipimport.zipimporter.invalidate_caches
    zip_invalidation_lazy()
    assert zipimport.zipimporter.invalidate_caches is installed
    assert importlib.import_module("sluice_zip_first").A == 1
    importlib.invalidate_caches()
    # The archive replaced on disk (a later modification time): the next invalidation reads it again.
    archive_write(path, {"sluice_zip_first": "A = 1", "sluice_zip_second": "B = 2"})
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    importlib.invalidate_caches()
    try:
        assert importlib.import_module("sluice_zip_second").B == 2
    finally:
        sys.modules.pop("sluice_zip_first", None)
        sys.modules.pop("sluice_zip_second", None)
