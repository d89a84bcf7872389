"""Refreshes (``mokkafs.fuse.refresh``) without a kernel: what is put into the page cache,
when, and in how many batches (a recording kernel stands in for /dev/fuse)."""

from __future__ import annotations

import threading
import time

import pytest
import trio
import trio.lowlevel
import trio.testing

from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.refresh import Refresher
from mokkafs.fuse.told import ToldStore
from mokkafs.fuse.units import Units
from mokkafs.tree.build import Entry, Tree, build
from mokkafs.tree.nodes import Dir, File, text
from tests.helpers.clocks import JumpingClock, Tenths
from tests.helpers.kernel import FakeKernel

PORTS = ("p1", "p2", "p3")


def tree() -> Tree:
    nodes = []
    for port in PORTS:
        nodes += [File(f"{port}/counters/{c}", Tenths(), quantum=0.1) for c in "abc"]
        nodes += [File(f"{port}/counters_ext/{c}", Tenths(), quantum=0.1) for c in "xy"]
        nodes.append(text(f"{port}/counters_ext/static", 1))
    return build(nodes, 1, 0)


def kept_by(kernel: FakeKernel, t: Tree, *held: str) -> tuple[ToldStore, Refresher]:
    """Refresher over ``kernel``, which holds "0" for each file of ``held``."""
    snapshots = ToldStore()
    for path in held:
        snapshots.take(entry(t, path).inode, b"0\n")
    return snapshots, Refresher(snapshots, Invalidator(kernel))


async def start_pushing(nursery: trio.Nursery, rounds: Refresher, t: Tree,
                        clock: JumpingClock) -> None:
    """``rounds.run`` on ``clock``, started and waiting for a hot unit."""
    nursery.start_soon(rounds.run, lambda: t, clock, clock.sleep_until)
    await trio.testing.wait_all_tasks_blocked()


def entry(t: Tree, path: str) -> Entry:
    found = t.resolve(path)
    assert found is not None
    return found


def test_rounds_batch_what_was_read_together_and_only_that() -> None:
    t = tree()
    kernel = FakeKernel()
    snapshots = ToldStore()
    rounds = Refresher(snapshots, Invalidator(kernel))

    batches: list[list[int]] = []

    async def read_port(port: str, now: float) -> None:
        await rounds.refresh(t, entry(t, f"{port}/counters"), now)
        await rounds.refresh(t, entry(t, f"{port}/counters_ext"), now)
        batches.append(kernel.stored_inodes())
        kernel.calls.clear()

    async def main() -> None:
        for port in PORTS:  # the kernel has read every file once, at 0.0 ("0")
            for name in ("counters/a", "counters/b", "counters/c", "counters_ext/x",
                         "counters_ext/y"):
                snapshots.take(entry(t, f"{port}/{name}").inode, b"0\n")
        assert rounds.is_trigger(t, entry(t, "p1/counters_ext"))
        for port in PORTS:  # a first scrape: each port on its own
            await read_port(port, 0.15)
        assert [len(b) for b in batches] == [5, 5, 5]  # counters/ and counters_ext/
        batches.clear()
        for port in PORTS:  # the next: the first port's round takes them all
            await read_port(port, 15.05)
        assert [len(b) for b in batches] == [15, 0, 0]
        batches.clear()
        for i in range(1, 30):  # one port polled alone: the others drop out of its rounds
            await read_port("p1", 15.05 + i * 0.1)
        assert [len(b) for b in batches[-10:]] == [5] * 10

    trio.run(main)
    assert snapshots.get(entry(t, "p3/counters/a").inode) is not None


def test_a_scrape_longer_than_a_step_computes_each_counter_once() -> None:
    ports = [f"q{i}" for i in range(64)]
    t = build([File(f"{p}/counters/{c}", Tenths(), quantum=0.1) for p in ports for c in "ab"],
              1, 0)
    kernel = FakeKernel()
    snapshots = ToldStore()
    rounds = Refresher(snapshots, Invalidator(kernel))
    for p in ports:
        for c in "ab":
            snapshots.take(entry(t, f"{p}/counters/{c}").inode, b"x\n")

    async def scrape(start: float) -> list[int]:
        batches = []
        for i, p in enumerate(ports):  # 7 ms a port: the scrape spans five steps
            await rounds.refresh(t, entry(t, f"{p}/counters"), start + i * 0.007)
            batches.append(len(kernel.stores()))
            kernel.calls.clear()
        return [b for b in batches if b]

    async def main() -> None:
        assert await scrape(0.031) == [2] * 64  # nothing known yet: each port on its own
        for n in range(1, 4):
            batches = await scrape(15 * n + 0.031)
            assert sum(batches) == 128  # each counter pushed once, not again for later steps
            assert len(batches) == 5  # one round per step the scrape spans

    trio.run(main)


class SlowKernel(FakeKernel):
    """Stores that take a while, in the worker thread: a second round could overtake one."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.overlapped = False
        self._guard = threading.Lock()

    def store(self, inode: int, data: bytes) -> None:
        with self._guard:
            self.active += 1
            self.overlapped |= self.active > 1
        time.sleep(0.002)
        with self._guard:
            self.active -= 1
            super().store(inode, data)


def test_rounds_of_two_steps_never_cross_and_snapshots_follow_the_kernel() -> None:
    t = tree()
    kernel = SlowKernel()
    snapshots, rounds = kept_by(kernel, t, "p1/counters/a")
    a = entry(t, "p1/counters/a")

    async def main() -> None:
        async with trio.open_nursery() as nursery:  # step 1's round, then step 2's, at once
            nursery.start_soon(rounds.refresh, t, entry(t, "p1/counters"), 0.15)
            await trio.lowlevel.checkpoint()
            nursery.start_soon(rounds.refresh, t, entry(t, "p1/counters"), 0.25)
        ours = [data for inode, data in kernel.stores() if inode == a.inode]
        assert ours == [b"1\n", b"2\n"]  # in step order: the kernel ends with step 2's
        snap = snapshots.get(a.inode)
        assert snap is not None and snap.content == b"2\n"

    trio.run(main)
    assert not kernel.overlapped


def test_units_a_swap_removed_are_forgotten() -> None:
    t = tree()
    rounds = Refresher(ToldStore(), Invalidator(FakeKernel()))

    async def main() -> None:
        for port in PORTS:
            await rounds.refresh(t, entry(t, f"{port}/counters"), 0.15)
        smaller = build([File(f"p1/counters/{c}", Tenths(), quantum=0.1) for c in "abc"], 2, 0)
        await rounds.refresh(smaller, entry(smaller, "p1/counters"), 1.15)
        await rounds.refresh(smaller, entry(smaller, "p1/counters"), 2.15)

    trio.run(main)
    assert len(rounds._last) == 1 and len(rounds._done) == 1


def test_a_unit_marked_so_is_the_trigger_of_all_its_directories() -> None:
    """An IB port (``Dir.unit``): its own entry starts the round for counters/ and
    counters_ext/, whose entries then start nothing; an unmarked parent (a PCI function,
    whose power/ a walk rarely enters) leaves each stepped directory its own trigger."""
    nodes: list[Dir | File] = [Dir("port", unit=True), Dir("function")]
    nodes += [File(f"port/{d}/{c}", Tenths(), quantum=0.1)
              for d in ("counters", "counters_ext") for c in "ab"]
    nodes += [File("function/power/active", Tenths(), quantum=0.1), text("function/vendor", 1)]
    t = build(nodes, 1, 0)
    port, function = entry(t, "port"), entry(t, "function")
    assert Units.of(t).triggers == {port.inode: port.inode,
                          entry(t, "function/power").inode: function.inode}
    kernel = FakeKernel()
    snapshots = ToldStore()
    rounds = Refresher(snapshots, Invalidator(kernel))
    assert rounds.is_trigger(t, port) and not rounds.is_trigger(t, entry(t, "port/counters"))
    assert not rounds.is_trigger(t, function) and rounds.is_trigger(t, entry(t, "function/power"))
    files = [entry(t, f"port/{d}/{c}") for d in ("counters", "counters_ext") for c in "ab"]
    for f in files:
        snapshots.take(f.inode, b"0\n")

    async def main() -> None:
        assert await rounds.refresh(t, port, 0.25) == pytest.approx(0.3)  # the step's end
        assert sorted(kernel.stored_inodes()) == sorted(f.inode for f in files)

    trio.run(main)
    assert all(snapshots.get(f.inode).content == b"2\n" for f in files)  # type: ignore[union-attr]


def test_a_unit_read_in_consecutive_steps_is_pushed_each_step_then_nothing_runs() -> None:
    """Hot units: pushed at the start of every step until their entry ends, then the pusher
    waits on an event with no timer (a node nobody reads costs nothing)."""
    t = tree()
    kernel = FakeKernel()
    names = [f"p1/{n}" for n in ("counters/a", "counters/b", "counters/c", "counters_ext/x",
                                 "counters_ext/y")]
    snapshots, rounds = kept_by(kernel, t, *names)
    files = [entry(t, name) for name in names]
    last_step = trio.Event()

    class Clock(JumpingClock):
        async def reached(self, when: float) -> None:
            if len(self.slept) == 12:
                last_step.set()
            await trio.lowlevel.checkpoint()

    clock = Clock()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await start_pushing(nursery, rounds, t, clock)
            assert await rounds.refresh(t, entry(t, "p1/counters"), 0.05) == pytest.approx(0.1)
            await trio.testing.wait_all_tasks_blocked()
            assert clock.slept == []  # asked once: not hot, nothing pushed ahead
            clock.now = 0.15  # the next step: hot, its entry lasts a second more
            until = await rounds.refresh(t, entry(t, "p1/counters"), 0.15)
            assert until == pytest.approx(1.2)
            with trio.fail_after(10):
                await last_step.wait()  # pushes before it waited on a worker thread
            await trio.testing.wait_all_tasks_blocked()
            # every step until its entry ends at 1.2, and one more: a reader back in that step
            # would have made it hot again
            assert clock.slept == pytest.approx([0.2 + i / 10 for i in range(12)])
            assert len(kernel.stores()) == 5 * 11  # step 0.1 when asked, then 0.2 ... 1.1
            assert snapshots.get(files[0].inode).content == b"11\n"  # type: ignore[union-attr]
            clock.slept.clear()
            await trio.testing.wait_all_tasks_blocked()
            assert clock.slept == [] and not rounds._hot  # waiting on the event: no timer
            nursery.cancel_scope.cancel()
        assert not rounds.pushing

    trio.run(main)


def test_a_push_that_fails_is_logged_once_and_tried_again_at_every_step(
        caplog: pytest.LogCaptureFixture, expected_logs: list[str]) -> None:
    """A failure while pushing ahead (a kernel store that raises) is logged once and the
    unit stays hot: the kernel holds its entry until the entry ends, so the next step's
    push must come, and once stores work again the content catches up."""
    expected_logs.append("pushing counters ahead of their readers failed")
    expected_logs.append("pushing counters ahead of their readers works again")
    t = tree()

    class Failing(FakeKernel):
        fail = False
        failed = 0

        def store(self, inode: int, data: bytes) -> None:
            if self.fail:
                self.failed += 1
                raise RuntimeError("the store broke")
            super().store(inode, data)

    kernel = Failing()
    snapshots, rounds = kept_by(kernel, t, "p1/counters/a")
    a = entry(t, "p1/counters/a")
    steps = trio.Event()

    class Clock(JumpingClock):
        async def reached(self, when: float) -> None:
            if kernel.failed >= 3:  # three steps failed in a row: stores work again
                kernel.fail = False
            if when > 0.75:
                steps.set()
                await trio.sleep_forever()
            await trio.lowlevel.checkpoint()

    clock = Clock()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await start_pushing(nursery, rounds, t, clock)
            await rounds.refresh(t, entry(t, "p1/counters"), 0.05)
            clock.now = 0.15
            await rounds.refresh(t, entry(t, "p1/counters"), 0.15)  # hot from here
            kernel.fail = True  # the pusher's stores at 0.2, 0.3 and 0.4 fail
            with trio.fail_after(10):
                await steps.wait()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert kernel.failed == 3 and not rounds.pushing
    assert caplog.text.count("pushing counters ahead of their readers failed") == 1
    assert snapshots.get(a.inode).content == b"7\n"  # type: ignore[union-attr]


def test_a_push_that_outlasts_a_step_is_followed_at_once() -> None:
    """A push slower than a step (a busy machine, many ports) ends in a later step than it
    began: that step is pushed at once, not skipped while the pusher waits for the next."""
    t = tree()
    clock = JumpingClock()

    class Slow(FakeKernel):
        def store(self, inode: int, data: bytes) -> None:
            super().store(inode, data)
            clock.now += 0.05  # three files: 0.15 s a push

    kernel = Slow()
    _, rounds = kept_by(kernel, t, *(f"p1/counters/{c}" for c in "abc"))

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await start_pushing(nursery, rounds, t, clock)
            await rounds.refresh(t, entry(t, "p1/counters"), 0.05)
            clock.now = 0.15
            await rounds.refresh(t, entry(t, "p1/counters"), 0.15)  # hot until 1.2
            with trio.fail_after(10):
                while rounds._hot:
                    await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()

    trio.run(main)
    # Every push ended in a later step, which was pushed next without a wait: the pusher
    # waited only for the step after the one asked for, and once the entry had ended.
    assert all(w < 0.2 + 1e-9 or w > 1.2 - 1e-9 for w in clock.slept), clock.slept
    assert len(kernel.stores()) >= 3 * 6  # about every 0.15 s from 0.15 to 1.2


def test_a_lookup_that_waited_for_a_failed_round_runs_its_own() -> None:
    """Two walks ask for a port in the same step; the first one's round fails (its LOOKUP
    gets EIO). The second must not answer as though the counters were in the kernel."""
    t = tree()

    class FailOnce(SlowKernel):
        failed = False

        def store(self, inode: int, data: bytes) -> None:
            if not self.failed:
                self.failed = True
                raise RuntimeError("the store broke")
            super().store(inode, data)

    kernel = FailOnce()
    _, rounds = kept_by(kernel, t, "p1/counters/a")
    a = entry(t, "p1/counters/a")
    outcomes: list[str] = []

    async def ask() -> None:
        try:
            await rounds.refresh(t, entry(t, "p1/counters"), 0.15)
            outcomes.append("answered")
        except RuntimeError:
            outcomes.append("failed")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.lowlevel.checkpoint()
            nursery.start_soon(ask)

    trio.run(main)
    assert sorted(outcomes) == ["answered", "failed"]
    assert kernel.stores() == [(a.inode, b"1\n")]  # the second walk's own round stored it


def test_catching_a_unit_up_refreshes_it_alone_and_is_not_an_asking() -> None:
    # A reader below a trigger (a working directory of counters/) reaches the stepped
    # directory, not the trigger: its unit is brought to the step, once a step, and nothing
    # else follows from it (no companions, no hot unit).
    t = tree()
    kernel = FakeKernel()
    snapshots, rounds = kept_by(kernel, t, *(f"{p}/counters/a" for p in PORTS))
    counters = entry(t, "p1/counters")

    async def main() -> None:
        rounds.pushing = True  # as if ``run`` were there: an asking could make a unit hot
        for port in PORTS:  # a scrape: the three ports are read together ...
            await rounds.refresh(t, entry(t, f"{port}/counters"), 0.15)
        kernel.calls.clear()
        assert rounds.is_stepped(t, counters) and rounds.is_stepped(t, entry(t, "p1/counters_ext"))
        await rounds.catch_up(t, counters, 0.25)  # ... yet catching p1 up is p1 alone
        await rounds.catch_up(t, entry(t, "p1/counters_ext"), 0.26)  # (same unit, same step)
        assert kernel.stored_inodes() == [entry(t, "p1/counters/a").inode]
        assert snapshots.get(kernel.stored_inodes()[0]).content == b"2\n"  # type: ignore[union-attr]
        assert not rounds._hot
        kernel.calls.clear()
        await rounds.refresh(t, counters, 0.27)  # an asking in the step catching up ran:
        assert not kernel.stores()  # nothing left to do, and p1 was asked for 0.12 s ago ...
        assert list(rounds._hot) == [entry(t, "p1").inode]  # ... so it is hot now

    trio.run(main)
