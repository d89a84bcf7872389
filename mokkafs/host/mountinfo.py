"""The mount table as a process sees it (``/proc/<pid>/mountinfo``), parsed in one place."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

FSTYPE = "fuse.mokkafs"  # how a mokkafs mount shows in the mount table


def fsname(mountpoint: Path | str) -> str:
    """The source field of a mokkafs mount: how a restarted daemon finds its own mounts."""
    return f"mokkafs@{os.path.abspath(mountpoint)}"


@dataclass(frozen=True, slots=True)
class MountEntry:
    """One line of mountinfo: the device, the root of the mount within its filesystem, where
    it is mounted, the filesystem type and source, the optional fields (``shared:N``,
    ``master:N``), the mount's id and its parent's, and its per-mount and filesystem
    options."""

    dev: str
    root: str
    point: str
    fstype: str
    source: str
    optional: tuple[str, ...] = ()
    mount_id: int = 0
    parent_id: int = 0  # the mount this one is mounted on
    options: str = ""  # this mount's: ro, nosuid, ...
    super_options: str = ""  # the filesystem's: mode=755, ...

    @property
    def shared(self) -> bool:
        return any(o.startswith("shared:") for o in self.optional)


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal
    return field.encode().decode("unicode_escape") if "\\" in field else field


def parse(text: str) -> list[MountEntry]:
    entries = []
    for line in text.splitlines():
        head, _, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if len(fields) < 6 or len(rest) < 2:
            continue
        entries.append(MountEntry(fields[2], _unescape(fields[3]), _unescape(fields[4]),
                                  rest[0], _unescape(rest[1]), tuple(fields[6:]),
                                  int(fields[0]), int(fields[1]), fields[5],
                                  rest[2] if len(rest) > 2 else ""))
    return entries


def mounts_of(pid: int | str = "self", proc: Path = Path("/proc")) -> list[MountEntry]:
    """The mounts ``pid`` sees, in mount order; [] when it cannot be read (it exited)."""
    try:
        return parse((proc / str(pid) / "mountinfo").read_text())
    except OSError:
        return []


def mounted_at(point: str | Path, pid: int | str = "self") -> list[MountEntry]:
    """The mounts stacked at ``point`` (an absolute path), bottom first."""
    return [m for m in mounts_of(pid) if m.point == str(point)]
