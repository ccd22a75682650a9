"""Writing results: sizes, number lists, and one marked section of a Markdown file replaced in place."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from bench.lib.paths import ROOT


def mib(value: float) -> str:
    return f"{value / 2**20:.1f} MiB"


def output_write(path: Path, text: str, begin_mark: str, end_mark: str) -> None:
    """Replace the section of ``path`` between the marks (or append one; create the file if needed)."""
    old = path.read_text() if path.exists() else "# Benchmarks\n"
    begin, end = old.find(begin_mark), old.find(end_mark)
    if begin >= 0 and end > begin:
        new = old[:begin] + text + old[end + len(end_mark) :]
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)


def number_list(text: str, kind: type = int) -> list[Any]:
    return [kind(part) for part in text.split(",") if part.strip()]


def git_commit() -> str:
    """The short commit the numbers were taken at."""
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"
