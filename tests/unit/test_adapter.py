"""The FUSE handlers without a kernel (s3ql's t3_fs_api): ``Operations`` over a small Tree and
a fake host sysfs (a directory of the test's), called directly, in milliseconds. The mount
tests prove only what needs a kernel."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import pyfuse3
import pytest
import trio

from mokkafs.fuse.adapter import Operations
from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.keep_cache import KeepCache
from mokkafs.fuse.no_open import NoOpen
from mokkafs.fuse.passthrough import HostView
from mokkafs.fuse.policies import cache_policy
from mokkafs.fuse.view import STATIC_TIMEOUT, TreeHolder, View
from mokkafs.host.sysfs import Sysfs
from mokkafs.tree.build import Tree, build
from mokkafs.tree.nodes import Dir, File, Node, Symlink, text
from tests.helpers.clocks import JumpingClock, Tenths

T = TypeVar("T")
GPU = "sys/devices/pci0000:00/0000:00:01.0"


def explode(now: float) -> bytes:
    raise ZeroDivisionError("a surface bug")


def small_tree(generation: int = 1, vendor: str = "0x10de", *extra: Node) -> Tree:
    return build([*extra,
        Dir("sys", merge=""),
        Dir("sys/devices", merge="devices", hide=("pci*",)),
        text(f"{GPU}/vendor", vendor),
        File(f"{GPU}/remove", b"", 0o220, error=errno.EACCES),
        Symlink("sys/bus/pci/devices/0000:00:01.0", "../../../devices/pci0000:00/0000:00:01.0"),
        File("sys/counter", Tenths(), quantum=0.1),
        File("sys/broken", explode),
    ], generation, generation * 1000)


class Instances:
    """One sysfs instance: a directory of the test's standing in for the host's sysfs."""

    def __init__(self, root: Path, broken: bool = False) -> None:
        cls = BrokenSysfs if broken else Sysfs
        self.own = cls(os.open(root, os.O_RDONLY | os.O_DIRECTORY), "fake")

    def key_of(self, pid: int) -> int:
        return 0

    def sysfs(self, key: int) -> Sysfs | None:
        return self.own if key == 0 else None


class BrokenSysfs(Sysfs):
    def listdir(self, rel: str) -> list[str]:
        raise OSError(errno.EMFILE, "Too many open files")


class TextSysfs(Sysfs):
    """Sizes every file 4096, as sysfs sizes its text attributes, and records each read."""

    reads: list[str]

    def lstat(self, rel: str) -> os.stat_result:
        st = super().lstat(rel)
        if not stat.S_ISREG(st.st_mode):
            return st
        fields = list(st)
        fields[stat.ST_SIZE] = 4096
        extra = ("st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_blksize", "st_blocks",
                 "st_rdev")
        return os.stat_result(fields, {name: getattr(st, name) for name in extra})

    def read(self, rel: str, size: int, offset: int) -> bytes:
        self.reads.append(rel)
        return super().read(rel, size, offset)


def host_root(tmp_path: Path) -> Path:
    root = tmp_path / "hostsys"
    (root / "kernel/mm").mkdir(parents=True)
    (root / "kernel/mm/transparent_hugepage").mkdir()
    (root / "devices/system/cpu").mkdir(parents=True)
    (root / "devices/system/cpu/online").write_text("0-1\n")
    (root / "devices/pci0000:00").mkdir()  # the host's PCI: hidden by the tree
    (root / "class/net/lo").mkdir(parents=True)
    return root


def make(tmp_path: Path, mode: CacheMode, broken: bool = False,
         ) -> tuple[Operations, TreeHolder, JumpingClock]:
    holder = TreeHolder(small_tree())
    clock = JumpingClock(10.0)
    view = View(holder, HostView(Instances(host_root(tmp_path), broken)), clock=clock)
    return Operations(view, cache_policy(mode, view)), holder, clock


def run(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return trio.run(fn)


CTX = cast(pyfuse3.RequestContext, SimpleNamespace(pid=os.getpid(), uid=0, gid=0, umask=0))


async def lookup_path(ops: Operations, path: str) -> pyfuse3.EntryAttributes:
    inode = pyfuse3.ROOT_INODE
    attrs = await ops.getattr(inode, CTX)
    for part in path.split("/"):
        attrs = await ops.lookup(inode, part.encode(), CTX)
        inode = attrs.st_ino
    return attrs


async def errno_of(coro: Coroutine[Any, Any, Any]) -> int:
    with pytest.raises(pyfuse3.FUSEError) as info:
        await coro
    return info.value.errno


@pytest.mark.parametrize("mode", list(CacheMode))
def test_tree_entries(tmp_path: Path, mode: CacheMode) -> None:
    ops, _, _ = make(tmp_path, mode)

    async def main() -> None:
        vendor = await lookup_path(ops, f"{GPU}/vendor")
        assert stat.S_ISREG(vendor.st_mode) and stat.S_IMODE(vendor.st_mode) == 0o444
        assert vendor.st_size == 7 and vendor.st_mtime_ns == 1000
        link = await lookup_path(ops, "sys/bus/pci/devices/0000:00:01.0")
        assert await ops.readlink(link.st_ino, CTX) == b"../../../devices/pci0000:00/0000:00:01.0"
        assert await errno_of(ops.readlink(vendor.st_ino, CTX)) == errno.EINVAL
        # absent from a directory of the tree alone: the kernel may remember that (only a
        # swap adds names, and it invalidates each); from one the host's merges in: not
        absent = await ops.lookup(pyfuse3.ROOT_INODE, b"nope", CTX)
        assert absent.st_ino == 0 and absent.entry_timeout == STATIC_TIMEOUT
        sys_dir = await lookup_path(ops, "sys")
        assert await errno_of(ops.lookup(sys_dir.st_ino, b"nope", CTX)) == errno.ENOENT
        assert await errno_of(ops.getattr(123456789, CTX)) == errno.ENOENT

    run(main)


def test_no_open_serves_the_snapshot_the_kernel_was_told_the_size_of(tmp_path: Path) -> None:
    ops, _, clock = make(tmp_path, CacheMode.NO_OPEN)
    assert ops.enable_symlink_cache

    async def main() -> None:
        assert await errno_of(ops.open(1, os.O_RDONLY, CTX)) == errno.ENOSYS
        assert await errno_of(ops.opendir(1, CTX)) == errno.ENOSYS
        vendor = await lookup_path(ops, f"{GPU}/vendor")
        assert await ops.read(vendor.st_ino, 0, 4096) == b"0x10de\n"
        counter = await lookup_path(ops, "sys/counter")
        assert counter.st_size == 4 and counter.attr_timeout == pytest.approx(0.1)
        clock.now = 10.25  # the counter moves on after the kernel was told its size ...
        assert await ops.read(counter.st_ino, 0, 4096) == b"100\n"  # ... the read stays whole
        again = await ops.getattr(counter.st_ino, CTX)
        assert again.st_size == 4 and again.st_mtime_ns > counter.st_mtime_ns
        assert again.attr_timeout == pytest.approx(0.05)  # until the next step of the clock
        assert await ops.read(counter.st_ino, 0, 4096) == b"102\n"
        remove = await lookup_path(ops, f"{GPU}/remove")
        assert remove.st_size == 4096 and stat.S_IMODE(remove.st_mode) == 0o220
        assert await errno_of(ops.read(remove.st_ino, 0, 4096)) == errno.EACCES

    run(main)


def test_no_open_serves_a_static_file_as_the_kernel_was_told_its_size(
        tmp_path: Path) -> None:
    """Between a swap and its invalidation the kernel holds the old size: a READ then must
    give the old bytes (the new would be cut to that size, or padded with NULs); once the
    kernel asks again, the new."""
    ops, holder, _ = make(tmp_path, CacheMode.NO_OPEN)

    async def main() -> None:
        vendor = await lookup_path(ops, f"{GPU}/vendor")
        assert vendor.st_size == 7
        holder.tree = small_tree(2, vendor="0x15b3-long")  # the swap, not yet invalidated
        assert await ops.read(vendor.st_ino, 0, 4096) == b"0x10de\n"
        again = await ops.getattr(vendor.st_ino, CTX)
        assert again.st_size == 12
        assert await ops.read(vendor.st_ino, 0, 4096) == b"0x15b3-long\n"
        holder.tree = small_tree(3, vendor="0x10de")
        listed = {name: attrs for name, attrs, _ in await ops.policy.entries(
            (await lookup_path(ops, GPU)).st_ino)}
        assert listed["vendor"].st_size == 7  # a listing gives the kernel sizes too
        assert await ops.read(vendor.st_ino, 0, 4096) == b"0x10de\n"
        await ops.forget([(vendor.st_ino, 1)])
        assert await ops.read(vendor.st_ino, 0, 4096) == b"0x10de\n"

    run(main)


def test_keep_cache_handles_hold_one_generation(tmp_path: Path) -> None:
    """Every open is direct_io: its reads come from its snapshot, never bounded by the size
    the kernel holds (which a swap can make another generation's)."""
    ops, holder, _ = make(tmp_path, CacheMode.KEEP_CACHE)
    assert not ops.enable_symlink_cache

    async def main() -> None:
        vendor = await lookup_path(ops, f"{GPU}/vendor")
        first = await ops.open(vendor.st_ino, os.O_RDONLY, CTX)
        assert first.direct_io and not first.keep_cache
        holder.tree = small_tree(2, vendor="0x15b3-long")  # a swap while the file is open
        assert await ops.read(first.fh, 0, 4096) == b"0x10de\n"  # the handle's generation
        second = await ops.open(vendor.st_ino, os.O_RDONLY, CTX)
        assert second.direct_io and not second.keep_cache
        assert await ops.read(second.fh, 2, 4096) == b"15b3-long\n"
        assert (await ops.getattr(vendor.st_ino, CTX)).st_size == 12
        assert await ops.read(first.fh, 2, 4096) == b"10de\n"
        await ops.release(first.fh)
        await ops.release(second.fh)
        assert await errno_of(ops.read(first.fh, 0, 4096)) == errno.EBADF
        counter = await lookup_path(ops, "sys/counter")
        dynamic = await ops.open(counter.st_ino, os.O_RDONLY, CTX)
        assert dynamic.direct_io and not dynamic.keep_cache
        assert await errno_of(ops.open(vendor.st_ino, os.O_WRONLY, CTX)) == errno.EACCES
        remove = await lookup_path(ops, f"{GPU}/remove")
        assert await errno_of(ops.open(remove.st_ino, os.O_RDONLY, CTX)) == errno.EACCES

    run(main)


@pytest.mark.parametrize("mode", list(CacheMode))
def test_merged_listing_and_host_nodes(tmp_path: Path, mode: CacheMode) -> None:
    ops, _, _ = make(tmp_path, mode)
    host = ops.view.host
    assert host is not None

    async def main() -> None:
        sys_attrs = await lookup_path(ops, "sys")
        fh = await ops.policy.opendir(sys_attrs.st_ino) if mode is CacheMode.KEEP_CACHE \
            else sys_attrs.st_ino
        items = await ops.policy.entries(fh)
        names = sorted(name for name, _, _ in items)
        assert names == ["broken", "bus", "class", "counter", "devices", "kernel"]
        inodes = [attrs.st_ino for _, attrs, _ in items]
        assert inodes == sorted(inodes)  # in the order of the offsets READDIR gives
        devices = await lookup_path(ops, "sys/devices")
        fh = await ops.policy.opendir(devices.st_ino) if mode is CacheMode.KEEP_CACHE \
            else devices.st_ino
        listed = sorted(name for name, _, _ in await ops.policy.entries(fh))
        assert listed == ["pci0000:00", "system"]  # the tree's root; the host's pci* hidden
        online = await lookup_path(ops, "sys/devices/system/cpu/online")
        assert stat.S_ISREG(online.st_mode) and host.held == 3  # system, cpu, online
        if mode is CacheMode.NO_OPEN:
            assert await ops.read(online.st_ino, 0, 4096) == b"0-1\n"
        await ops.forget([(online.st_ino, 1)])
        assert host.node(online.st_ino) is None and host.held == 2  # the kernel let go

    run(main)


@pytest.mark.parametrize("mode", list(CacheMode))
def test_a_host_attribute_not_everyone_may_read_is_never_read_for_a_stat(
        tmp_path: Path, mode: CacheMode) -> None:
    """Its size is 4096 whoever asks (the kernel caches one size for every caller), the daemon
    reads it for no stat, and the kernel is told to keep no attributes of it: a permitted
    reader's short read shrinks the size the kernel holds, and the next stat must ask."""
    root = host_root(tmp_path)
    (root / "kernel/mm/secret").write_text("a secret of 25 bytes ...\n")
    (root / "kernel/mm/secret").chmod(0o600)
    (root / "kernel/mm/public").write_text("42\n")
    instances = Instances(root)
    sysfs = TextSysfs(instances.own.fd, "fake")
    sysfs.reads = []
    instances.own = sysfs
    view = View(TreeHolder(small_tree()), HostView(instances), clock=JumpingClock(10.0))
    ops = Operations(view, cache_policy(mode, view))
    nobody = cast(pyfuse3.RequestContext, SimpleNamespace(pid=os.getpid(), uid=65534,
                                                           gid=65534, umask=0))

    async def main() -> None:
        kernel_mm = await lookup_path(ops, "sys/kernel/mm")
        for ctx in (nobody, CTX):
            secret = await ops.lookup(kernel_mm.st_ino, b"secret", ctx)
            assert secret.st_size == 4096 and sysfs.reads == []
            again = await ops.getattr(secret.st_ino, ctx)
            assert again.st_size == 4096 and sysfs.reads == []
            if mode is CacheMode.NO_OPEN:
                assert secret.attr_timeout == again.attr_timeout == 0
        listed = {name: attrs for name, attrs, _ in await ops.policy.entries(
            await ops.policy.opendir(kernel_mm.st_ino) if mode is CacheMode.KEEP_CACHE
            else kernel_mm.st_ino)}
        assert listed["secret"].st_size == 4096 and sysfs.reads == []
        public = await ops.lookup(kernel_mm.st_ino, b"public", nobody)
        if mode is CacheMode.NO_OPEN:  # for everyone: its real length, read to learn it
            assert public.st_size == 3 and sysfs.reads == ["kernel/mm/public"]
            # A permitted reader (the kernel checked the mode bits) reads it afresh.
            assert await ops.read(secret.st_ino, 0, 4096) == b"a secret of 25 bytes ...\n"
        else:
            assert public.st_size == 4096 and sysfs.reads == []
            handle = await ops.open(secret.st_ino, os.O_RDONLY, CTX)
            assert handle.direct_io
            assert await ops.read(handle.fh, 0, 4096) == b"a secret of 25 bytes ...\n"
            await ops.release(handle.fh)

    run(main)


@pytest.mark.parametrize("mode", list(CacheMode))
def test_a_host_directory_that_cannot_be_listed_is_an_error(tmp_path: Path,
                                                            mode: CacheMode) -> None:
    ops, _, _ = make(tmp_path, mode, broken=True)

    async def main() -> None:
        inode = ops.view.holder.tree.resolve("sys").inode  # type: ignore[union-attr]
        if mode is CacheMode.NO_OPEN:
            # getattr of a merged directory lists the host's names to date its listing
            assert await errno_of(ops.getattr(inode, CTX)) == errno.EMFILE
            assert await errno_of(ops.policy.entries(inode)) == errno.EMFILE
        else:
            assert await errno_of(ops.opendir(inode, CTX)) == errno.EMFILE

    run(main)


@pytest.mark.parametrize("mode", list(CacheMode))
def test_a_handler_that_raises_answers_eio_alone(tmp_path: Path, mode: CacheMode,
                                                 expected_logs: list[str]) -> None:
    expected_logs.append(r"\w+ failed; answering EIO")
    ops, _, _ = make(tmp_path, mode)

    async def main() -> None:
        inode = ops.view.holder.tree.resolve("sys/broken").inode  # type: ignore[union-attr]
        if mode is CacheMode.NO_OPEN:
            assert await errno_of(ops.getattr(inode, CTX)) == errno.EIO
        else:
            assert await errno_of(ops.open(inode, os.O_RDONLY, CTX)) == errno.EIO
        vendor = await lookup_path(ops, f"{GPU}/vendor")  # and the rest still serves
        assert vendor.st_size == 7

    run(main)


def test_modes_are_chosen_once(tmp_path: Path) -> None:
    ops, _, _ = make(tmp_path, CacheMode.NO_OPEN)
    assert isinstance(ops.policy, NoOpen)
    ops, _, _ = make(tmp_path / "k", CacheMode.KEEP_CACHE)
    assert isinstance(ops.policy, KeepCache)



@pytest.mark.parametrize("mode", list(CacheMode))
def test_a_listing_that_spans_a_swap_lists_the_new_tree(tmp_path: Path, mode: CacheMode) -> None:
    """A merged directory's listing waits on host I/O. A swap meanwhile must not leave the
    kernel the old tree's entries and sizes (cached for an hour) beside the new tree's
    bytes: the listing is made again from the tree in force."""
    ops, holder, _ = make(tmp_path, mode)
    view = ops.view
    host_entries = view.host_entries
    swaps: list[Tree] = []

    def swapping(*args: Any) -> Any:
        if not swaps:  # one swap, while the host is read
            swaps.append(holder.tree)
            holder.tree = small_tree(2, "0x10de", text("sys/extra", 10))
        return host_entries(*args)

    async def main() -> None:
        sys_attrs = await lookup_path(ops, "sys")
        view.host_entries = swapping  # type: ignore[method-assign,assignment]
        fh = await ops.policy.opendir(sys_attrs.st_ino) if mode is CacheMode.KEEP_CACHE \
            else sys_attrs.st_ino
        listed = {name: attrs for name, attrs, _ in await ops.policy.entries(fh)}
        assert swaps and listed["extra"].st_size == 3
        assert {"bus", "class", "counter", "devices", "kernel"} < listed.keys()

    run(main)
