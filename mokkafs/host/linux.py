"""Checked wrappers of the Linux calls Python's os module lacks (mount, umount2, setns,
open_tree, move_mount, statx, renameat2), raising OSError with the errno like os does; and
glibc's malloc_trim."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import threading

CLONE_NEWNS = 0x0002_0000
CLONE_NEWNET = 0x4000_0000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE, MS_SHARED = 32, 4096, 16384, 1 << 18, 1 << 20
MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 1024, 2048, 1 << 21, 1 << 24
# mountinfo's per-mount options as mount(2) flags
MOUNT_FLAGS = {"ro": MS_RDONLY, "nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
               "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME,
               "strictatime": MS_STRICTATIME}
MNT_DETACH, UMOUNT_NOFOLLOW = 2, 8
# open_tree(2) and move_mount(2), Linux 5.2: the same numbers on every architecture
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429
OPEN_TREE_CLONE, MOVE_MOUNT_F_EMPTY_PATH = 1, 4

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    check(libc.mount(None if source is None else os.fsencode(source), os.fsencode(target),
                     None if fstype is None else os.fsencode(fstype), flags,
                     None if data is None else os.fsencode(data)),
          f"mount {source or ''} on {target}")


def umount_lazily(target: str) -> bool:
    """Detach what is mounted at ``target`` (never through a symbolic link); False (not an
    error) when nothing is."""
    return bool(libc.umount2(os.fsencode(target), MNT_DETACH | UMOUNT_NOFOLLOW) == 0)


def clone_tree(path: str) -> int:
    """A detached copy of the mount at ``path`` (rooted at ``path``, as a bind of it would
    be): a descriptor to ``move_tree`` somewhere later, in this or another namespace."""
    return check(libc.syscall(SYS_OPEN_TREE, -100, os.fsencode(path),  # AT_FDCWD
                              OPEN_TREE_CLONE | os.O_CLOEXEC),
                 f"open_tree {path}")


def move_tree(fd: int, target: str) -> None:
    """Attach the detached mount tree ``fd`` at ``target``."""
    check(libc.syscall(SYS_MOVE_MOUNT, fd, b"", -100, os.fsencode(target),
                       MOVE_MOUNT_F_EMPTY_PATH), f"move_mount onto {target}")


def setns(fd: int, nstype: int, what: str) -> None:
    check(libc.setns(fd, nstype), f"setns into {what}")


def release_free_heap() -> None:
    """Give the pages of freed heap back to the kernel (glibc's malloc_trim; nothing where the
    C library has none). After building a large tree the heap holds its transient peak,
    which RSS keeps counting until something is allocated there again."""
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)


AT_EMPTY_PATH, AT_SYMLINK_NOFOLLOW = 0x1000, 0x100
STATX_MNT_ID = 0x1000
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def mount_id(fd: int) -> int:
    """The id of the mount the open file ``fd`` lives on (statx, Linux 5.8): unlike st_dev it
    tells a bind mount from the filesystem it binds."""
    buf = ctypes.create_string_buffer(256)  # struct statx
    check(libc.statx(fd, b"", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, buf),
          "statx")
    if not int.from_bytes(buf.raw[0:4], "little") & STATX_MNT_ID:
        raise OSError(0, "statx: this kernel reports no mount id")
    return int.from_bytes(buf.raw[144:152], "little")  # stx_mnt_id


def rename_at(src_dir: int, src: str, dst_dir: int, dst: str, flags: int) -> None:
    """renameat2: ``RENAME_NOREPLACE`` fails where ``dst`` exists, ``RENAME_EXCHANGE`` swaps
    the two names atomically."""
    check(libc.renameat2(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), flags),
          f"rename {src} to {dst}")


def ended(code: int | None) -> str:
    """How a child process ended, from its return code (negative: the signal that killed it)."""
    if code is not None and code < 0:
        return f"killed by signal {-code}"
    return f"exit status {code}"


def end_with(pid: int) -> None:
    """End this process (status 0, no clean-up) as soon as process ``pid`` ends: a thread
    waits on its pidfd. Not PR_SET_PDEATHSIG: that follows the thread that started this
    process, and trio starts processes from worker threads, which end when idle. Raises
    ``ProcessLookupError`` when ``pid`` is gone already."""
    fd = os.pidfd_open(pid)

    def wait() -> None:
        select.select([fd], [], [])  # readable once the process has ended
        os._exit(0)

    threading.Thread(target=wait, name=f"end-with-{pid}", daemon=True).start()
