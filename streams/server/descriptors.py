"""The open-file limit: every open stream is a socket, so a worker holds at most about that many streams.

``runstreams`` raises the soft limit (``ulimit -n``, often 1,024) to the hard limit at start and says
what each worker can hold; the workers inherit it. The hard limit is the host's to raise (systemd's
``LimitNOFILE``, a container runtime's ``--ulimit nofile``): docs/operations.md, "Open files".
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

# Descriptors a worker uses besides its streams: the listening socket, Kafka (one or two per broker per
# topic), the database, the channel layer, log files, the event loop's own.
RESERVED_DESCRIPTORS = 100
# Below this many streams per worker, the start says how to raise the hard limit.
FEW_STREAMS = 10_000


@dataclass(frozen=True)
class OpenFiles:
    """The soft limit before and after the start raised it, and the hard limit (``None``: unlimited)."""

    before: int
    soft: int
    hard: int | None

    @property
    def streams_per_worker(self) -> int:
        return max(0, self.soft - RESERVED_DESCRIPTORS)

    def describe(self, workers: int) -> str:
        """One line for the start: the limit, what it holds, and how to raise it when it is low."""
        raised = f"raised from {self.before:,} to" if self.soft > self.before else "at"
        hard = "unlimited" if self.hard is None else f"{self.hard:,}"
        held = f"about {self.streams_per_worker:,} streams per worker"
        if workers > 1:
            held += f", {self.streams_per_worker * workers:,} with {workers} workers"
        line = f"Open files: soft limit {raised} {self.soft:,} (hard limit {hard}): {held}"
        if self.streams_per_worker < FEW_STREAMS:
            line += (
                "; raise the hard limit for more (systemd LimitNOFILE=, docker --ulimit nofile=, "
                "docs/operations.md 'Open files')"
            )
        return line


def open_files_raise() -> OpenFiles:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (children inherit it); what it is now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    # An unlimited hard limit is not a number the kernel takes as a soft limit: fs.nr_open bounds it.
    target = hard if hard != resource.RLIM_INFINITY else max(soft, _nr_open())
    if soft == resource.RLIM_INFINITY:
        target = soft
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return OpenFiles(before=before, soft=soft, hard=None if hard == resource.RLIM_INFINITY else hard)


def _nr_open() -> int:
    try:
        with open("/proc/sys/fs/nr_open") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 1_048_576
