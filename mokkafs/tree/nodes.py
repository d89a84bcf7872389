"""What a surface describes: directories, files and symlinks at paths below the mount root.

A ``File`` holds either its bytes (static) or a function of the time (dynamic: IB counters).
The tree never computes dynamic content; the FUSE side does, when it serves it. In keep-cache
mode that is when a reader opens the file. In no-open mode it is when the kernel asks for the
file's attributes, or when a refresh puts its unit's fresh content into the page cache
(``mokkafs.fuse.refresh``), for hot units at each step.
``error`` makes a file that exists but fails to read with that errno, as some sysfs attributes
do (write-only ``remove``, ``gid_attrs/ndevs`` on an InfiniBand port). ``store`` marks a file
whose writes the view simulates: the key its writes go to (``mokkafs.model.sysfs.StoreKey``),
which the tree and the FUSE edge pass on without looking inside.

A node is made with its path, and keeps it as its directory's path and its name, each one
string shared by every node that has the same (``Placed``): at 256 HCAs whole paths took 7.9
MiB, a quarter of the tree, since a tree keeps every node it serves.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import sys
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING

from mokkafs.model.sysfs import UNREADABLE, WRITE_ONLY, StoreKey
from mokkafs.tree.stream import Stream

Clock = float  # seconds on time.monotonic()'s clock
Render = Callable[[Clock], bytes]


@dataclass(frozen=True, slots=True)
class Placed:
    """Where a node is: the ``path`` it is made with, kept as ``directory`` and ``name``."""

    directory: str = field(init=False)
    name: str = field(init=False)

    if TYPE_CHECKING:  # (set below the node classes, which take ``path`` to be made)
        @property
        def path(self) -> str: ...

    # Each kind of node declares ``path`` (an InitVar, its first argument), which mypy does not
    # see here.
    def __post_init__(self, path: str) -> None:  # type: ignore[override]
        directory, _, name = path.rpartition("/")
        object.__setattr__(self, "directory", sys.intern(directory))  # (frozen)
        object.__setattr__(self, "name", sys.intern(name))


@dataclass(frozen=True, slots=True)
class Dir(Placed):
    """A directory. With ``merge`` set, it also shows the entries of that directory of the
    host's sysfs (a path relative to its root, "" for the root itself), read when asked,
    except names matching a ``hide`` pattern and names the tree itself has. With ``unit``
    set, the stepped files of its subdirectories are refreshed together when its own entry
    is looked up (an IB port: ``counters/`` and ``counters_ext/`` in one request a step;
    ``mokkafs.fuse.refresh``); every path to them passes through it."""

    path: InitVar[str]
    mode: int = 0o755
    merge: str | None = None
    hide: tuple[str, ...] = ()
    unit: bool = False

    def hides(self, name: str) -> bool:
        return hidden(name, self.hide)


def hidden(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether a host name matches one of a merged directory's hide patterns (``Dir.hide``)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


@dataclass(frozen=True, slots=True)
class File(Placed):
    path: InitVar[str]
    content: bytes | Render = b""
    mode: int = 0o444
    error: int = 0  # errno returned on open for reading; 0 = readable
    # Dynamic content changes only at multiples of this many seconds on the clock (0: at any
    # instant), so a cache may keep what it read until the next multiple.
    quantum: float = 0.0
    # Read record by record, each open at its own position (dev/kmsg; mokkafs.tree.stream)
    stream: Stream | None = None
    # Where its writes go (None: it has no store the view simulates; mokkafs.writes.stores)
    store: StoreKey | None = None

    @property
    def dynamic(self) -> bool:
        return not isinstance(self.content, bytes)

    def read(self, now: Clock) -> bytes:
        return self.content if isinstance(self.content, bytes) else self.content(now)

    def fresh_for(self, now: Clock) -> float:
        """Seconds from ``now`` until dynamic content may next change: the next multiple of
        the quantum, found the way the content finds its step (``floor(now / quantum)``; a
        float ``now % quantum`` can put an exact multiple at the end of the step before)."""
        if self.quantum <= 0:
            return 0.0
        return (math.floor(now / self.quantum) + 1) * self.quantum - now


@dataclass(frozen=True, slots=True)
class Symlink(Placed):
    path: InitVar[str]
    target: str


@dataclass(frozen=True, slots=True)
class CharDevice(Placed):
    """A character device node, for consumers that only stat it (libibverbs stats
    /dev/infiniband/uverbsN); FUSE mounts are nodev, so it cannot be opened through the view."""

    path: InitVar[str]
    major: int
    minor: int
    mode: int = 0o666


Node = Dir | File | Symlink | CharDevice


def _path(node: Placed) -> str:
    """The mount-relative path ('' for the root)."""
    return f"{node.directory}/{node.name}" if node.directory else node.name


# Only now: a dataclass takes a class attribute of a field's name for its default.
Placed.path = property(_path)  # type: ignore[method-assign,assignment]


def text(path: str, value: object, mode: int = 0o444, store: StoreKey | None = None) -> File:
    """A sysfs-style attribute: the value's text plus a newline."""
    return File(path, _encoded(f"{value}\n"), mode, store=store)


def write_only(path: str, mode: int = WRITE_ONLY, store: StoreKey | None = None) -> File:
    """A sysfs attribute with a store method and no show method: it fails to open for
    reading (``mokkafs.model.sysfs``)."""
    return File(path, b"", mode, error=UNREADABLE, store=store)


@functools.lru_cache(maxsize=1024)
def _encoded(line: str) -> bytes:
    """One bytes object for each recent line: a node's attributes repeat (at 256 HCAs, 29,352
    static files hold 4,626 distinct contents, 6,614 of them ``0``), 1.2 MiB of copies."""
    return line.encode()


def relative_link(path: str, target: str) -> Symlink:
    """A symlink at ``path`` pointing at ``target`` (both mount-relative), written relative
    to the link's directory as the kernel writes sysfs links."""
    src = path.split("/")[:-1]
    dst = target.split("/")
    # Like kernfs_get_target_path: the common base is an ancestor of the target's parent, so
    # a link to an ancestor still names it (mlx5_0/device -> ../../../0000:1c:00.0).
    common = 0
    while common < min(len(src), len(dst) - 1) and src[common] == dst[common]:
        common += 1
    # (interned: 5,554 links at 256 HCAs have 2,598 distinct targets)
    return Symlink(path, sys.intern("/".join([".."] * (len(src) - common) + dst[common:])))
