"""Checked wrappers of the Linux calls Python's os module lacks (mount, umount2, setns),
raising OSError with the errno like os does; and glibc's malloc_trim."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

CLONE_NEWNS = 0x0002_0000
CLONE_NEWNET = 0x4000_0000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MS_SHARED = 32, 4096, 16384, 1 << 18, 1 << 20
MNT_DETACH = 2

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    check(libc.mount(None if source is None else os.fsencode(source), os.fsencode(target),
                     None if fstype is None else os.fsencode(fstype), flags, None),
          f"mount {source or ''} on {target}")


def umount_lazily(target: str) -> bool:
    """Detach what is mounted at ``target``; False (not an error) when nothing is."""
    return bool(libc.umount2(os.fsencode(target), MNT_DETACH) == 0)


def setns(fd: int, nstype: int, what: str) -> None:
    check(libc.setns(fd, nstype), f"setns into {what}")


def release_free_heap() -> None:
    """Give the pages of freed heap back to the kernel (glibc's malloc_trim; nothing where the
    C library has none). After building a large tree the heap holds its transient peak,
    which RSS keeps counting until something is allocated there again."""
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)
