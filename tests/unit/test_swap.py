"""Swap pieces without a mount: the diff, the invalidator's thread rule, counter continuity."""

from __future__ import annotations

import errno
import threading
import time
from dataclasses import fields, replace
from pathlib import Path

import pytest
import trio

import mokkafs.tree.build as build_module
from mokkafs import counters
from mokkafs.faults.effects import carry
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.layers.faults import FAULTS
from mokkafs.profile.schema import Fault
from mokkafs.serve import swap
from mokkafs.source import Update
from mokkafs.state import Generation, Traffic
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler
from mokkafs.tree.build import ROOT_INODE, Inode, TreeError, build, inode_of
from mokkafs.tree.diff import Invalidation, diff
from mokkafs.tree.nodes import Dir, File, Symlink, text
from tests.helpers.kernel import FakeKernel
from tests.helpers.mounts import REPO
from tests.helpers.profiles import state_of
from tests.helpers.swapper import swapper_of


class RecordingKernel(FakeKernel):
    """Refuses stores of two inodes, as the kernel does: 99 it does not hold, 98 fails."""

    def store(self, inode: int, data: bytes) -> None:
        if inode == 99:  # as the kernel answers for an inode it does not hold
            raise OSError(errno.ENOENT, "not cached")
        if inode == 98:
            raise OSError(errno.EIO, "failed")
        super().store(inode, data)


PLAN = Invalidation(changed_data=(Inode(11),), changed_attrs=(Inode(12),),
                    removed=((ROOT_INODE, "gone", Inode(13)),), added=((ROOT_INODE, "new"),))


def test_invalidation_from_the_loop_thread_fails() -> None:
    kernel = RecordingKernel()

    async def main() -> None:
        invalidator = Invalidator(kernel)
        with pytest.raises(RuntimeError, match="must not run on the FUSE loop's thread"):
            invalidator.apply(PLAN)
        assert kernel.calls == []
        counts = await trio.to_thread.run_sync(invalidator.apply, PLAN)
        assert counts.sent == 4

    trio.run(main)
    assert [c[0] for c in kernel.calls] == ["entry", "inode", "inode", "entry"]
    # more before less: the new name first, the gone one last (tree/diff.py)
    assert kernel.calls[0][1] == (1, b"new", 0) and kernel.calls[3][1] == (1, b"gone", 13)
    assert kernel.calls[1][1] == (11, False) and kernel.calls[2][1] == (12, True)
    assert all(tid != threading.main_thread().ident for _, _, tid in kernel.calls)


def test_stores_off_the_loop_and_a_failed_store_drops_the_inode() -> None:
    kernel = RecordingKernel()

    async def main() -> None:
        invalidator = Invalidator(kernel)
        with pytest.raises(RuntimeError, match="must not run on the FUSE loop's thread"):
            invalidator.store([(7, b"1\n")], [])
        counts = await trio.to_thread.run_sync(
            invalidator.store, [(7, b"1\n"), (99, b"2\n"), (98, b"3\n")], [5])
        assert (counts.sent, counts.unknown) == (3, 1)  # 7 stored; 5 and 98 dropped

    trio.run(main)
    assert [(c[0], c[1][0]) for c in kernel.calls] == [
        ("store", 7), ("inode", 5), ("inode", 98)]


def test_diff_and_mtimes() -> None:
    old = build([text("a/x", 1), text("a/y", 1), Dir("b"), text("b/z", 1),
                 Symlink("l", "a")], 1, 100)
    new = build([text("a/x", 2), text("a/y", 1), text("c/w", 1), Symlink("l", "c")], 2, 200,
                previous=old)
    plan = diff(old, new)
    # A file's bytes, a link's target and a listing may all sit in a kernel cache.
    assert set(plan.changed_data) == {inode_of("a/x"), inode_of("l", "l")}
    assert plan.shrunk == (1,)  # the root lost "b": forgotten after the files
    assert plan.changed_attrs == ()
    # The top of the removed subtree; a directory is not reported deleted (its inode would
    # stay dead when the path, and so the inode number, comes back).
    assert plan.removed == ((1, "b", 0),)
    assert plan.added == ((1, "c"),)
    assert new.resolve("a/y").mtime_ns == 100  # type: ignore[union-attr]
    assert new.resolve("a/x").mtime_ns == 200  # type: ignore[union-attr]


def test_a_directory_that_comes_to_hold_counters_is_looked_up_again() -> None:
    # In no-open mode such a directory's entry lasts until the next step, not an hour: only a
    # new LOOKUP brings that to a kernel that looked it up before (an ib-errors fault starts).
    old = build([text("port/hw_counters/symbol_error", 0)], 1, 0)
    new = build([File("port/hw_counters/symbol_error", lambda now: b"7\n", quantum=0.1)], 2, 0,
                previous=old)
    assert (inode_of("port", "d"), "hw_counters") in diff(old, new).added
    assert (inode_of("port", "d"), "hw_counters") in diff(new, old).added


def test_a_path_that_changes_kind_gets_a_new_inode() -> None:
    old = build([text("p", 1)], 1, 0)
    new = build([Symlink("p", "q")], 2, 0, previous=old)
    assert old.resolve("p").inode != new.resolve("p").inode  # type: ignore[union-attr]
    assert diff(old, new).removed == ((1, "p", inode_of("p")),)  # a file: reported deleted
    assert diff(old, new).added == ((1, "p"),)


def test_unchanged_profile_changes_nothing() -> None:
    state = state_of("h100")
    assembler = Assembler(SURFACES)
    tree, _ = assembler.build(state)
    again, _ = assembler.build(replace(state, generation=Generation(2)), tree)
    assert len(diff(tree, again)) == 0


def test_a_patched_tree_is_diffed_by_what_it_replaced_alone(tmp_path: Path) -> None:
    """A swap that changes no path patches the tree before (``tree.build.patch``), and the
    diff looks only at what the patch replaced: the same plan as a look at every entry. A
    diff against any other tree than the one patched looks at every entry."""
    h100 = (REPO / "mokkafs/profiles/h100.yaml").read_text()
    newer = tmp_path / "h100.yaml"
    newer.write_text(h100.replace('fw_version: "28.39.2048"', 'fw_version: "28.40.1000"'))
    assembler = Assembler(SURFACES)
    tree, _ = assembler.build(state_of("h100"))
    again, _ = assembler.build(replace(state_of(newer), generation=Generation(2)), tree)
    replaced = again.replaced(tree)
    assert replaced is not None and 0 < len(replaced) < len(again.entries) // 10
    plan = diff(tree, again)
    everything = diff(tree, replace(again, patched=None))  # every entry looked at
    for field in fields(plan):  # (in another order within a kind)
        assert sorted(getattr(plan, field.name)) == sorted(getattr(everything, field.name))
    fw = {e.inode for path, e in again.walk() if path.endswith("/fw_ver")}
    assert fw and fw <= set(plan.changed_data)
    other, _ = Assembler(SURFACES).build(state_of("h100"))
    assert again.replaced(other) is None  # not the tree it patched: no shortcut
    assert diff(other, again) == everything


def test_counters_stay_monotonic_when_rates_change() -> None:
    fast = Traffic(1e9, 1e9, 1000.0, 0.1, 0.0, ())
    slow = Traffic(1e6, 1e6, 1000.0, 0.1, 0.0, ())
    carried = replace(slow, origin=100.0, base=counters.carried(fast, 100.0).base)
    for name in counters.COUNTERS:
        assert counters.counter(carried, name, 100.0) >= counters.counter(fast, name, 99.9)
        assert counters.counter(carried, name, 150.0) >= counters.counter(carried, name, 100)
    # 1e9 B/s for 100 s is 2.5e10 words; then 1e6 B/s for 10 s adds 2.5e6.
    assert counters.counter(carried, "port_xmit_data", 110.0) == 25_000_000_000 + 2_500_000
    # 1e6 packets/s for 100 s, then 1e3/s for 23 s.
    assert counters.counter(carried, "port_xmit_packets", 123.0) == 100_000_000 + 23_000


def test_carry_counters_across_states(tmp_path: Path) -> None:
    """A swap at t=10 s from the default 12.5 MB/s to 50 MB/s: the counters of every surviving
    port go on from where they were, at the new rate; a new port starts at its own origin."""
    old = state_of("h100")
    text = (REPO / "mokkafs/profiles/h100.yaml").read_text().replace(
        '  guid_prefix: "946dae"\n', '  guid_prefix: "946dae"\n'
        "  traffic: {xmit_bytes_per_sec: 5.0e7}\n")
    path = tmp_path / "faster.yaml"
    path.write_text(text)
    carried = carry(old, replace(state_of(path), generation=Generation(2)), 10.0)
    for hca in carried.hcas:
        traffic = hca.ports[0].traffic
        # 12.5e6 B/s for 10 s = 31,250,000 words, then 50e6 B/s for 5 s = 62,500,000.
        assert counters.counter(traffic, "port_xmit_data", 10.0) == 31_250_000
        assert counters.counter(traffic, "port_xmit_data", 15.0) == 31_250_000 + 62_500_000


def test_readyz_report_follows_serving() -> None:
    from mokkafs.obs.status import Status

    status = Status(serving=False, generation=3, surfaces={"pci": 10})
    report = status.report()
    assert report["ready"] is False
    assert report["surfaces"] == {"pci": {"status": "not serving", "nodes": 10, "generation": 3}}
    status.serving = True
    assert status.report()["ready"] is True


def test_a_carry_that_raises_keeps_the_last_view(monkeypatch: pytest.MonkeyPatch,
                                                 expected_logs: list[str]) -> None:
    """Carrying counters over to a new State runs in the build's worker thread and under its
    guard: a bug there is reported like a surface's and the served view stays, where before it
    ran on the FUSE loop and its exception ended the swapper (and the daemon)."""
    expected_logs.append("building generation 2 failed")
    state = state_of("h100")
    tree, counts = Assembler(SURFACES).build(state)
    threads: list[int] = []

    def broken(since: object, new: object, now: float) -> None:
        threads.append(threading.get_ident())
        raise ZeroDivisionError("a bug in carrying counters")

    monkeypatch.setattr(swap, "carry", broken)

    async def main() -> None:
        swapper = swapper_of(tree, state, counts)
        status = swapper.status
        result = await swapper.apply(
            Update(replace(state, generation=Generation(2)), None, 0.0))
        assert result is None and status.apply_errors == {"build": 1}
        assert "a bug in carrying counters" in str(status.last_error)
        assert swapper.holder.tree is tree and swapper.state is state

    trio.run(main)
    assert threads and threads[0] != threading.get_ident()


def test_a_run_time_change_gives_what_it_alters_the_time_of_the_change() -> None:
    """A fault applied at run time is a change made now: the files it alters get this moment
    as their mtime (as a load's do), and every other file keeps the profile's."""
    state = state_of("h100")
    tree, counts = Assembler(SURFACES).build(state)
    swapper = swapper_of(tree, state, counts)
    port, other = (f"{state.function(h.bdf).path}/infiniband/{h.name}/ports/1"
                   for h in state.hcas[:2])
    loaded = int(state.loaded_at * 1e9)
    before = time.time_ns()
    down = Fault.model_validate({"name": "down", "kind": "ib-port-down", "target": "mlx5_0/1"})

    async def main() -> None:
        assert await swapper.change(FAULTS, lambda book, profile: book.apply(
            [down], profile, "f.yaml")) is not None

    trio.run(main)
    served = swapper.holder.tree
    changed, kept = served.resolve(f"{port}/state"), served.resolve(f"{other}/state")
    assert changed is not None and kept is not None
    assert changed.mtime_ns >= before > loaded
    assert kept.mtime_ns == loaded
    assert swapper.status.last_success is not None and swapper.status.last_success >= before / 1e9


def test_two_paths_of_one_inode_number_are_refused_when_reused_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that keeps the last tree's entries still finds two paths hashed to one inode."""
    old = build([text("a/x", 1), text("a/y", 1)], 1, 100)
    real = build_module.inode_of
    monkeypatch.setattr(build_module, "inode_of", lambda path, kind="f": real(
        "a/x" if path == "b/z" else path, kind))
    with pytest.raises(TreeError, match="inode collision"):
        build([text("a/x", 1), text("a/y", 1), text("b/z", 1)], 2, 200, previous=old)
