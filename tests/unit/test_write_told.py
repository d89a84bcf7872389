"""A write's answer and the kernel's caches (mokkafs.serve.writes): the answer waits for the
kernel to be told what the write made, so a listing right after it shows it; but not for the
written file's own pages, and only for ``TOLD_WAIT``, since a reader can hold what the telling
needs until the answer comes."""

from __future__ import annotations

import os
import threading

import pytest
import trio

from mokkafs.fuse.writes import Caller
from mokkafs.model.sysfs import StoreKey
from mokkafs.serve import writes
from mokkafs.serve.writes import Writer
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler
from mokkafs.tree.build import inode_of
from tests.helpers.kernel import FakeKernel
from tests.helpers.profiles import H100_NIC0, state_of
from tests.helpers.swapper import swapper_of

NUMVFS = StoreKey(H100_NIC0, "sriov_numvfs")
ROOT = Caller(0, 0, os.getpid())


class HeldKernel(FakeKernel):
    """Each invalidation waits until ``free`` is set, as one waits for a lock a reader holds."""

    def __init__(self) -> None:
        super().__init__()
        self.free = threading.Event()
        self.asked = threading.Event()

    def invalidate_inode(self, inode: int, attr_only: bool) -> None:
        self.asked.set()
        self.free.wait(60)
        super().invalidate_inode(inode, attr_only)

    def invalidate_entry(self, parent: int, name: bytes, deleted: int) -> None:
        self.asked.set()
        self.free.wait(60)
        super().invalidate_entry(parent, name, deleted)


def store_four_vfs(kernel: HeldKernel, release_after_asked: bool) -> list[bool]:
    """Whether the kernel had been told anything when the write answered, and before that
    (when the kernel is released once asked) whether the write had answered by then."""
    state = state_of("h100")
    tree, counts = Assembler(SURFACES).build(state)
    result: list[bool] = []

    async def main() -> None:
        swapper = swapper_of(tree, state, counts)
        swapper.teller.invalidator.kernel = kernel
        writer = Writer(swapper)
        answered = trio.Event()

        async def write() -> None:
            assert await writer.store(NUMVFS, b"4\n", ROOT) == 0
            answered.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            if release_after_asked:
                with trio.fail_after(30):
                    await trio.to_thread.run_sync(kernel.asked.wait, 30)
                result.append(answered.is_set())
                kernel.free.set()
            with trio.fail_after(30):
                await answered.wait()
            result.append(bool(kernel.calls))  # each call is recorded once it returns
            kernel.free.set()  # whatever is left, so the teller's thread ends

    trio.run(main)
    return result


def test_a_write_answers_once_the_kernel_knows_what_it_made(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The bound is the next test's: here a loaded machine's scheduling must not reach it.
    monkeypatch.setattr(writes, "TOLD_WAIT", 30.0)
    answered_early, told = store_four_vfs(HeldKernel(), release_after_asked=True)
    assert not answered_early
    assert told


def test_a_write_answers_at_the_bound_when_the_telling_is_held(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writes, "TOLD_WAIT", 0.05)
    (told,) = store_four_vfs(HeldKernel(), release_after_asked=False)
    assert not told  # answered while the kernel still waited: no cycle can form


class PagesHeld(FakeKernel):
    """A drop of ``written``'s pages waits until ``free`` is set: the writer holds them until
    its WRITE is answered."""

    def __init__(self, written: int) -> None:
        super().__init__()
        self.written = written
        self.free = threading.Event()

    def invalidate_inode(self, inode: int, attr_only: bool) -> None:
        if inode == self.written and not attr_only:
            self.free.wait(60)
        super().invalidate_inode(inode, attr_only)


def test_a_write_does_not_wait_for_its_own_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The written file's pages are dropped after the answer: waiting for them would wait
    the whole bound, since the writer holds them until it is answered."""
    monkeypatch.setattr(writes, "TOLD_WAIT", 120.0)
    state = state_of("h100")
    tree, counts = Assembler(SURFACES).build(state)
    kernel = PagesHeld(inode_of(f"{state.function(H100_NIC0).path}/sriov_numvfs"))

    async def main() -> None:
        swapper = swapper_of(tree, state, counts)
        swapper.teller.invalidator.kernel = kernel
        try:
            with trio.fail_after(30):  # far below the bound
                assert await Writer(swapper).store(NUMVFS, b"4\n", ROOT) == 0
            entries = [args for kind, args, _ in kernel.calls if kind == "entry"]
            assert any(name == b"virtfn0" for _, name, _ in entries)  # the listing was told
        finally:
            kernel.free.set()

    trio.run(main)
