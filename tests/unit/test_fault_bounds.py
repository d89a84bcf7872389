"""What a fault may cost: a floor on a flap's period, a bound on the faults a node holds from
every source together, and a scheduler that installs the view of now when it wakes late
(never replaying the transitions it missed) and at most one view every ``MIN_GAP``."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.lowlevel
import trio.testing

from mokkafs.errors import FaultError, ProfileError
from mokkafs.faults.book import FaultBook
from mokkafs.faults.effects import applied, at
from mokkafs.profile.schema import MAX_FAULTS, Fault, FaultFile
from mokkafs.serve.faults import MIN_GAP, FaultScheduler
from mokkafs.serve.served import Installed, Prepared
from mokkafs.serve.swap import Swapper
from mokkafs.state import State
from mokkafs.surfaces import SURFACES
from mokkafs.tree.assemble import Assembler
from tests.helpers.clocks import JumpingClock
from tests.helpers.faults import port_file, with_faults
from tests.helpers.swapper import swapper_of


def test_a_flap_faster_than_a_port_can_is_refused_naming_the_field_and_the_floor(
        tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as info:
        with_faults(tmp_path, "  - {name: f, kind: ib-port-flap, target: mlx5_0/1, "
                              "every: 0.001, count: 10000}\n")
    [problem] = info.value.problems
    assert problem.path == "faults[0].every" and problem.line
    assert "0.001 s is below the floor of 1 s" in problem.message
    assert "use every: 1 or more" in problem.message
    assert "faulty.yaml" in str(info.value)


def test_a_profile_cannot_ask_for_more_flap_cycles_than_a_node_holds(tmp_path: Path) -> None:
    flaps = "".join(f"  - {{name: f{i}, kind: ib-port-flap, target: mlx5_0/1, every: 1, "
                    f"count: 10000}}\n" for i in range(2))
    with pytest.raises(ProfileError) as info:
        with_faults(tmp_path, flaps)
    assert "20000 flap cycles" in str(info.value) and "10000 at most" in str(info.value)


def faults(n: int, prefix: str) -> list[Fault]:
    return [Fault(name=f"{prefix}{i}", kind="gpu-lost", target="gpu0", after=3600)
            for i in range(n)]


def test_the_node_bound_counts_the_profiles_faults_and_the_control_sockets(
        tmp_path: Path) -> None:
    profile = with_faults(tmp_path, "".join(
        f"  - {{name: p{i}, kind: gpu-lost, target: gpu0, after: 3600}}\n" for i in range(200)))
    book = FaultBook()
    book.apply(faults(50, "a"), profile, "a.yaml")
    book.apply(faults(6, "b"), profile, "b.yaml")  # 256: the bound, reached
    with pytest.raises(FaultError) as info:
        book.apply(faults(1, "c"), profile, "c.yaml")
    [problem] = info.value.problems
    assert problem.path == "faults"
    assert f"257 faults, and a node holds {MAX_FAULTS} at most" in problem.message
    assert "the 256 faults the node holds already" in problem.message
    book.apply(faults(6, "b"), profile, "b.yaml")  # the same names again replace, not add
    book.clear(["p0"], profile)  # a profile fault cleared no longer counts
    book.apply(faults(1, "c"), profile, "c.yaml")
    assert len(book.merge(profile).faults) == MAX_FAULTS


def test_one_apply_holds_a_bounded_number_of_faults() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="at most 64 items"):
        FaultFile(faults=faults(65, "x"))


class Recording(Swapper):
    """A swapper that records each transition it installs: (time shown, the port's state)."""

    installs: list[tuple[float, str]]
    last: float  # ``reached`` is set once a view of this time or later is installed
    reached: trio.Event

    async def transition(self, prepared: Prepared | None, when: float,
                         version: int) -> Installed | None:
        done = await super().transition(prepared, when, version)
        if done is not None:
            self.installs.append((self.shown_at, port_file(self.holder.tree, self.state,
                                                           "state")))
            if self.shown_at >= self.last:
                self.reached.set()
        return done


def transitions(state: State, clock: JumpingClock, last: float) -> list[tuple[float, str]]:
    """Run the scheduler over ``state`` (shown as of 0) on ``clock`` until it installs the
    view of ``last``, then until it has nothing left to do; what it installed."""
    tree, counts = Assembler(SURFACES).build(at(state, 0.0))

    async def main() -> list[tuple[float, str]]:
        swapper = swapper_of(tree, state, counts, kind=Recording, clock=clock, shown_at=0.0)
        swapper.installs, swapper.last, swapper.reached = [], last, trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(FaultScheduler(swapper, clock, clock.sleep_until).run)
            with trio.fail_after(60):
                await swapper.reached.wait()
            for _ in range(20):  # time for one more, were there one
                await trio.to_thread.run_sync(lambda: None)
                await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        return swapper.installs

    return trio.run(main)


class LateOnce(JumpingClock):
    """Its first wake-up comes at ``late``, far beyond the time slept for (a stopped
    process, a busy core); the later ones on time."""

    def __init__(self, late: float) -> None:
        super().__init__(0.0)
        self.late: float | None = late

    async def reached(self, when: float) -> None:
        if self.late is not None:
            self.now, self.late = self.late, None
        await trio.lowlevel.checkpoint()


FLAP = "  - {name: f, kind: ib-port-flap, target: mlx5_0/1, after: 1, every: 1, count: 5}\n"
UP, DOWN = "4: ACTIVE\n", "1: DOWN\n"


def test_a_late_wake_up_installs_the_view_of_now_once_and_replays_nothing(
        tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, FLAP), 0.0)  # down 1-2, 3-4, 5-6, 7-8, 9-10
    assert transitions(state, LateOnce(5.5), last=10.0) == [
        (5.5, DOWN), (6.0, UP), (7.0, DOWN), (8.0, UP), (9.0, DOWN), (10.0, UP)]


def test_a_fault_whose_end_has_passed_does_not_flap_afterwards(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, FLAP), 0.0)
    assert transitions(state, LateOnce(100.0), last=100.0) == [(100.0, UP)]


def test_transitions_closer_than_the_gap_are_one_view(tmp_path: Path) -> None:
    state = applied(with_faults(
        tmp_path, "  - {name: a, kind: ib-port-down, target: mlx5_0/1, after: 1, for: 10}\n"
                  "  - {name: b, kind: ib-port-down, target: mlx5_1/1, after: 1.05, for: 10}\n"
    ), 0.0)
    shown = [when for when, _ in transitions(state, JumpingClock(0.0), last=11.0 + MIN_GAP)]
    assert shown == pytest.approx([1.0, 1.0 + MIN_GAP, 11.0, 11.0 + MIN_GAP])
