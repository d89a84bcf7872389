"""The FUSE edge of writes without a kernel (mokkafs.fuse.writes): a write reaches the store
the Operations were made with as its file's key, its bytes and who writes, never as a path;
a file without a key, a writer other than root or without CAP_SYS_ADMIN, and a store's
refusal each answer their errno; and /proc is read in a worker thread, off the event loop."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pyfuse3
import pytest
import trio

from mokkafs.fuse import writes
from mokkafs.fuse.adapter import Operations
from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.policies import cache_policy
from mokkafs.fuse.view import TreeHolder, View
from mokkafs.fuse.writes import Caller
from mokkafs.model.sysfs import StoreKey
from mokkafs.tree.build import build
from mokkafs.tree.nodes import File, text

GPU = "sys/devices/pci0000:00/0000:00:01.0"
KEY = StoreKey("0000:00:01.0", "remove")
PID = 4242
ADMIN, NO_ADMIN = 0x1FFFFFFFFF, 0x1FFFFFFFFF & ~(1 << writes.CAP_SYS_ADMIN)


def ctx(uid: int = 0) -> pyfuse3.RequestContext:
    return cast(pyfuse3.RequestContext, SimpleNamespace(pid=PID, uid=uid, gid=0, umask=0))


class Recorded:
    """A store that answers ``answer`` and keeps what it was given."""

    def __init__(self, answer: int = 0) -> None:
        self.answer = answer
        self.calls: list[tuple[StoreKey, bytes, Caller]] = []

    async def store(self, key: StoreKey, data: bytes, caller: Caller) -> int:
        self.calls.append((key, data, caller))
        return self.answer


def make(tmp_path: Path, store: Recorded | None, caps: int = ADMIN) -> Operations:
    proc = tmp_path / "proc"
    (proc / str(PID)).mkdir(parents=True)
    (proc / str(PID) / "status").write_text(f"Name:\tsh\nCapEff:\t{caps:016x}\n")
    tree = build([text(f"{GPU}/vendor", "0x10de", 0o644),
                  File(f"{GPU}/remove", b"", 0o220, error=errno.EACCES, store=KEY)], 1, 1000)
    view = View(TreeHolder(tree))
    ops = Operations(view, cache_policy(CacheMode.NO_OPEN, view), store=store)
    ops.writes.proc = proc
    return ops


def inode(ops: Operations, name: str) -> int:
    entry = ops.view.holder.tree.resolve(f"{GPU}/{name}")
    assert entry is not None
    return entry.inode


async def errno_of(ops: Operations, name: str, data: bytes = b"1\n",
                   context: pyfuse3.RequestContext | None = None) -> int:
    try:
        await ops.write(inode(ops, name), 0, data, context or ctx())
    except pyfuse3.FUSEError as exc:
        return exc.errno
    return 0


def test_a_write_forwards_the_key_the_bytes_and_who_writes(tmp_path: Path) -> None:
    store = Recorded()
    ops = make(tmp_path, store)

    async def main() -> None:
        # no-open mode: the WRITE names the inode and carries the writer's context
        assert await ops.write(inode(ops, "remove"), 0, b"1\n", ctx()) == 2
        # keep-cache mode: the OPEN is checked, and its handle names the file
        info = await ops.open(inode(ops, "remove"), os.O_WRONLY | os.O_TRUNC, ctx())
        assert await ops.write(info.fh, 0, b"\xff" * 5000, None) == 5000
        await ops.release(info.fh)

    trio.run(main)
    who = Caller(0, 0, PID)
    assert store.calls == [(KEY, b"1\n", who), (KEY, b"\xff" * 5000, who)]


def test_the_errnos_of_the_edge_and_of_the_store(tmp_path: Path) -> None:
    async def main() -> None:
        ops = make(tmp_path / "a", Recorded(errno.EBUSY))
        assert await errno_of(ops, "remove") == errno.EBUSY  # the store's answer
        assert await errno_of(ops, "vendor") == errno.EACCES  # no store: root too
        assert await errno_of(ops, "remove", context=ctx(uid=1000)) == errno.EACCES
        assert await errno_of(make(tmp_path / "b", None), "remove") == errno.EROFS
        with pytest.raises(pyfuse3.FUSEError) as info:
            await ops.mkdir(pyfuse3.ROOT_INODE, b"new", 0o755, ctx())
        assert info.value.errno == errno.EPERM
        unprivileged = make(tmp_path / "c", Recorded(), caps=NO_ADMIN)
        assert await errno_of(unprivileged, "remove") == errno.EROFS
        with pytest.raises(pyfuse3.FUSEError) as info:
            await unprivileged.mkdir(pyfuse3.ROOT_INODE, b"new", 0o755, ctx())
        assert info.value.errno == errno.EROFS

    trio.run(main)


def test_proc_is_read_off_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         ) -> None:
    threads: list[bool] = []
    read = writes.may_administer

    def may_administer(pid: int, proc: Path = writes.PROC) -> bool:
        threads.append(threading.current_thread() is threading.main_thread())
        return read(pid, proc)

    monkeypatch.setattr(writes, "may_administer", may_administer)
    ops = make(tmp_path, Recorded())

    async def main() -> None:
        assert await errno_of(ops, "remove") == 0
        await ops.open(inode(ops, "remove"), os.O_WRONLY, ctx())
        with pytest.raises(pyfuse3.FUSEError):
            await ops.create(inode(ops, "vendor"), b"new", 0o644, os.O_WRONLY, ctx())

    trio.run(main)
    assert threads == [False, False, False]
