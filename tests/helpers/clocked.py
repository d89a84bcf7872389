"""Daemons on a clock the test drives (``tests.helpers.serve_clocked``): the one command that
starts one, and a mount of it whose clock the test sets."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.mounts import Mount, mokkafs_mount


def set_clock(clock: Path, seconds: float) -> None:
    """What the daemon reads as its time from now on."""
    clock.write_text(repr(seconds))


def clocked_command(clock: Path, stepped_dir_timeout: float | None = None) -> list[str]:
    """``mokkafs mount`` on the clock in the file ``clock`` (its arguments follow);
    ``stepped_dir_timeout`` shortens the attribute timeout of directories of counters."""
    timeout = [] if stepped_dir_timeout is None else ["--stepped-dir-timeout",
                                                      str(stepped_dir_timeout)]
    return [sys.executable, "-m", "tests.helpers.serve_clocked", str(clock), *timeout]


@dataclass(frozen=True)
class Clocked:
    """A running daemon and the file its clock reads (seconds, as the test sets them)."""

    mount: Mount
    clock: Path

    @property
    def sys(self) -> Path:
        return self.mount.sys

    @property
    def path(self) -> Path:
        return self.mount.path

    def set(self, seconds: float) -> None:
        set_clock(self.clock, seconds)


@contextmanager
def clocked_mount(mountpoint: Path, args: Sequence[str], start: float, *,
                  stepped_dir_timeout: float | None = None) -> Iterator[Clocked]:
    """``mokkafs mount ARGS MOUNTPOINT`` on a clock that reads ``start`` until the test sets
    it, in a file beside the mountpoint (``clock``)."""
    clock = mountpoint.parent / "clock"
    set_clock(clock, start)
    command = [*clocked_command(clock, stepped_dir_timeout), *args, str(mountpoint)]
    with mokkafs_mount(mountpoint, args, command=command) as mount:
        yield Clocked(mount, clock)
