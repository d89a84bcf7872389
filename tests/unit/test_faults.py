"""Faults as State: the schema and its errors, timing, fleet selection, and what each kind does
to every file it touches, undone exactly when it ends; counters stay monotonic throughout."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import pytest

from mokkafs import counters
from mokkafs.errors import ProfileError
from mokkafs.faults.effects import applied, at, carry
from mokkafs.faults.schedule import next_change, status, windows
from mokkafs.profile.faults import selected
from mokkafs.state import FaultSpec, State
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import File
from tests.helpers.faults import H100, port_file, with_faults
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import state_of, tree_of
from tests.helpers.swapper import swapper_of


def read(tree: Tree, path: str, now: float = 0.0) -> str:
    entry = tree.resolve(path)
    assert entry is not None and isinstance(entry.node, File), path
    return entry.node.read(now).decode()


# -- schedule -------------------------------------------------------------------------------

def spec(**kw: object) -> FaultSpec:
    base = {"name": "f", "kind": "ib-port-down", "target": "mlx5_0/1", "source": "profile",
            "origin": 100.0}
    return FaultSpec(**{**base, **kw})  # type: ignore[arg-type]


def test_windows_and_states_follow_after_for_every_count() -> None:
    once = spec(after=10.0, duration=5.0)
    assert windows(once) == ((110.0, 115.0),)
    assert [status(once, t) for t in (109.9, 110.0, 114.9, 115.0)] == [
        "pending", "active", "active", "ended"]
    forever = spec()
    assert windows(forever) == ((100.0, math.inf),) and status(forever, 1e9) == "active"
    flap = spec(kind="ib-port-flap", after=1.0, every=2.0, count=3)
    assert windows(flap) == ((101.0, 103.0), (105.0, 107.0), (109.0, 111.0))
    assert status(flap, 104.0) == "active" and status(flap, 111.0) == "ended"
    assert next_change([flap, once], 104.0) == 105.0
    assert next_change([flap, once], 111.0) == 115.0 and next_change([flap], 111.0) is None
    assert status(spec(origin=None), 1e9) == "pending"  # not applied yet
    assert status(spec(selected=False), 1e9) == "off" and windows(spec(selected=False)) == ()


def test_a_fleet_fraction_picks_the_same_few_nodes_every_time() -> None:
    nodes = [f"node-{i:03d}" for i in range(100)]
    picked = [n for n in nodes if selected(n, "campaign-7", 0.05)]
    assert 1 <= len(picked) <= 12
    assert picked == [n for n in nodes if selected(n, "campaign-7", 0.05)]
    assert picked != [n for n in nodes if selected(n, "campaign-8", 0.05)]  # per fault
    assert all(selected(n, "x", 1.0) for n in nodes)
    assert not any(selected(n, "x", 0.0) for n in nodes)


def test_fraction_zero_is_listed_off_and_does_nothing(tmp_path: Path) -> None:
    state = applied(with_faults(
        tmp_path, "  - {name: f, kind: gpu-removed, target: gpu0, fraction: 0}\n"), 0.0)
    assert status(state.faults[0], 1.0) == "off"
    assert at(state, 1.0) == state


# -- bad faults --------------------------------------------------------------------------

BAD = {
    "unknown-kind": ("  - {name: a, kind: gpu-melted, target: gpu0}\n", "faults[0].kind",
                     "expected 'ib-port-down'"),
    "no-target": ("  - {name: a, kind: gpu-lost}\n", "faults[0].target", "required"),
    "missing-port": ("  - {name: a, kind: ib-port-down, target: mlx5_42/1}\n",
                     "faults[0].target", "no InfiniBand port 'mlx5_42/1'"),
    "missing-gpu": ("  - {name: a, kind: gpu-lost, target: gpu8}\n", "faults[0].target",
                    "no GPU 'gpu8'"),
    "hca-is-not-a-gpu": ("  - {name: a, kind: gpu-removed, target: \"0000:18:00.0\"}\n",
                         "faults[0].target", "no GPU"),
    "field-of-another-kind": ("  - {name: a, kind: gpu-lost, target: gpu0, cable: true}\n",
                              "faults[0].cable", "gpu-lost does not use cable"),
    "flap-without-every": ("  - {name: a, kind: ib-port-flap, target: mlx5_0/1, count: 2}\n",
                           "faults[0]", "needs every"),
    "bad-counter": ("  - {name: a, kind: ib-errors, target: mlx5_0/1, rates: {bogus: 1}}\n",
                    "faults[0].rates.bogus", "not an error counter"),
    "no-rates": ("  - {name: a, kind: ib-errors, target: mlx5_0/1}\n", "faults[0].rates",
                 "needs rates"),
    "gen-above-max": ("  - {name: a, kind: pcie-degraded, target: gpu0, gen: 6}\n",
                      "faults[0].gen", "Gen5 at most"),
    "twice": ("  - {name: a, kind: gpu-lost, target: gpu0}\n"
              "  - {name: a, kind: gpu-lost, target: gpu1}\n", "faults[1].name",
              "names another fault"),
    "negative-after": ("  - {name: a, kind: gpu-lost, target: gpu0, after: -1}\n",
                       "faults[0].after", "greater than or equal to 0"),
    "fraction-above-one": ("  - {name: a, kind: gpu-lost, target: gpu0, fraction: 2}\n",
                           "faults[0].fraction", "less than or equal to 1"),
    "bad-name": ("  - {name: 'a b', kind: gpu-lost, target: gpu0}\n", "faults[0].name",
                 "pattern"),
    "ib-width": ("  - {name: a, kind: ib-degraded, target: mlx5_0/1, width: 16}\n",
                 "faults[0].width", "1, 2, 4, 8 or 12 lanes"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_fault_names_the_field(tmp_path: Path, case: str) -> None:
    text, where, message = BAD[case]
    with pytest.raises(ProfileError) as info:
        with_faults(tmp_path, text)
    assert message in str(info.value), str(info.value)
    assert any(p.path == where and p.line for p in info.value.problems), info.value.problems


# -- effects -------------------------------------------------------------------------------

def test_port_down_then_up_as_the_kernel_shows_it(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: d, kind: ib-port-down, target: mlx5_0/1, "
                                          "after: 10, for: 20, cable: true}\n"), 0.0)
    before, during, after = (tree_of(at(state, t)) for t in (5.0, 15.0, 40.0))
    assert port_file(before, state, "state") == "4: ACTIVE\n"
    assert port_file(during, state, "state") == "1: DOWN\n"
    assert port_file(during, state, "phys_state") == "2: Polling\n"  # the cable is out
    assert port_file(during, state, "rate") == "10 Gb/sec (4X SDR)\n"
    assert port_file(during, state, "state", "mlx5_3") == "4: ACTIVE\n"  # the others stay
    for name in ("state", "phys_state", "rate", "lid"):
        assert port_file(after, state, name) == port_file(before, state, name)
    # traffic stops for the 20 s it is down; link_downed counts the onset once
    data = [int(port_file(during, state, "counters/port_xmit_data", now=t))
            for t in (10.0, 20.0, 30.0)]
    assert data[0] == data[1] == data[2] > 0
    later = int(port_file(after, state, "counters/port_xmit_data", now=40.0))
    rate = state.hcas[0].ports[0].traffic.xmit_bytes_per_sec
    assert later == math.floor(rate * 20 / 4)  # 40 s, less the 20 s down
    assert [port_file(after, state, "counters/link_downed", now=t) for t in (9.9, 10.5, 40)] == [
        "0\n", "1\n", "1\n"]


def test_a_flap_counts_every_down(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: f, kind: ib-port-flap, target: mlx5_0, "
                                          "every: 1, count: 5}\n"), 0.0)
    tree = tree_of(at(state, 0.5))
    assert port_file(tree, state, "state") == "1: DOWN\n"
    assert port_file(tree_of(at(state, 1.5)), state, "state") == "4: ACTIVE\n"
    assert port_file(tree, state, "counters/link_downed", now=100.0) == "5\n"
    assert port_file(tree, state, "phys_state") == "3: Disabled\n"


def test_errors_grow_at_their_rates_and_saturate(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: e, kind: ib-errors, target: mlx5_0/1, "
                                          "after: 5, rates: {symbol_error: 100, "
                                          "link_error_recovery: 2, local_ack_timeout_err: 3}}\n"),
                    0.0)
    tree = tree_of(at(state, 6.0))
    assert port_file(tree, state, "counters/symbol_error", now=15.0) == "1000\n"
    assert port_file(tree, state, "counters/link_error_recovery", now=15.0) == "20\n"
    assert port_file(tree, state, "hw_counters/local_ack_timeout_err", now=15.0) == "30\n"
    assert port_file(tree, state, "counters/symbol_error", now=10_000.0) == "65535\n"  # 16 bits
    assert port_file(tree, state, "counters/link_error_recovery", now=10_000.0) == "255\n"
    assert port_file(tree, state, "counters/symbol_error", "mlx5_3", now=15.0) == "0\n"


def test_degraded_link_rate(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: g, kind: ib-degraded, target: mlx5_0/1, "
                                          "width: 2}\n"), 0.0)
    assert port_file(tree_of(at(state, 1.0)), state, "rate") == "200 Gb/sec (2X NDR)\n"
    slow = applied(with_faults(tmp_path, "  - {name: g, kind: ib-degraded, target: mlx5_0/1, "
                                         "rate_gbps: 100, width: 4}\n"), 0.0)
    assert port_file(tree_of(at(slow, 1.0)), slow, "rate") == "100 Gb/sec (4X EDR)\n"


def test_pcie_degraded_on_both_ends_of_the_link(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: p, kind: pcie-degraded, target: gpu0, "
                                          "gen: 3, width: 8}\n"), 0.0)
    now = at(state, 1.0)
    gpu = now.function("0000:1b:00.0")
    port = now.function(gpu.parent or "")
    for fn in (gpu, port):
        assert (fn.link.current_gen, fn.link.current_width) == (3, 8)
    tree = tree_of(now)
    assert read(tree, f"{gpu.path}/current_link_speed") == "8.0 GT/s PCIe\n"
    assert read(tree, f"{gpu.path}/max_link_speed") == "32.0 GT/s PCIe\n"


def test_a_lost_gpu_reads_all_ones(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: l, kind: gpu-lost, target: gpu0}\n"), 0.0)
    now = at(state, 1.0)
    tree = tree_of(now)
    gpu = now.function("0000:1b:00.0")
    config = tree.resolve(f"{gpu.path}/config")
    assert config is not None and isinstance(config.node, File)
    assert config.node.read(0) == b"\xff" * 4096
    assert read(tree, f"{gpu.path}/current_link_speed") == "Unknown\n"
    assert read(tree, f"{gpu.path}/current_link_width") == "63\n"
    assert read(tree, f"{gpu.path}/vendor") == "0x10de\n"  # cached by the kernel
    info = read(tree, "proc/driver/nvidia/gpus/0000:1b:00.0/information")
    assert "Video BIOS: \t ??.??.??.??.??\n" in info and "Bus Location: \t 0000:1b:00.0" in info
    assert now.function(gpu.parent or "").link.current_width == 0  # its port's link is down


@pytest.mark.parametrize(("fault", "bdf", "gone"), [
    ("{name: r, kind: gpu-removed, target: gpu0}", "0000:1b:00.0",
     ["proc/driver/nvidia/gpus/0000:1b:00.0", "sys/bus/pci/drivers/nvidia/0000:1b:00.0"]),
    ("{name: r, kind: hca-removed, target: mlx5_0}", "0000:18:00.0",
     ["sys/class/infiniband/mlx5_0", "sys/class/infiniband_verbs/uverbs0",
      "dev/infiniband/uverbs0", "sys/bus/pci/drivers/mlx5_core/0000:18:00.0"]),
])
def test_a_removed_function_leaves_and_comes_back_the_same(tmp_path: Path, fault: str, bdf: str,
                                                            gone: list[str]) -> None:
    state = applied(with_faults(tmp_path, f"  - {fault[:-1]}, for: 10}}\n"), 0.0)
    path = state.function(bdf).path
    whole, removed, back = (tree_of(at(state, t)) for t in (-1.0, 5.0, 10.0))
    for p in [path, f"sys/bus/pci/devices/{bdf}", *gone]:
        assert whole.resolve(p) is not None and removed.resolve(p) is None, p
    assert removed.resolve(path.rpartition("/")[0]) is not None  # its slot stays
    assert {p: e.node for p, e in back.walk()} == {p: e.node for p, e in whole.walk()}


def test_counters_stay_monotonic_when_faults_come_and_go(tmp_path: Path) -> None:
    plain = applied(with_faults(tmp_path, "  - {name: e, kind: gpu-lost, target: gpu7}\n"), 0.0)
    down = with_faults(tmp_path, "  - {name: e, kind: gpu-lost, target: gpu7}\n"
                                 "  - {name: d, kind: ib-port-down, target: mlx5_0/1}\n")
    applied_down = carry(plain, down, 50.0)  # applied at 50 s
    assert [f.origin for f in applied_down.faults] == [0.0, 50.0]  # e kept its time
    cleared = carry(applied_down, plain, 80.0)  # cleared at 80 s
    names = ("port_xmit_data", "port_xmit_packets", "link_downed", "unicast_rcv_packets")
    readings = []
    for state, t in ((plain, 10.0), (plain, 50.0), (applied_down, 50.0), (applied_down, 60.0),
                     (applied_down, 80.0), (cleared, 80.0), (cleared, 90.0)):
        traffic = at(state, t).hcas[0].ports[0].traffic
        readings.append([counters.counter(traffic, n, t - state.started_at) for n in names])
    for a, b in itertools.pairwise(readings):
        assert all(x <= y for x, y in zip(a, b, strict=True)), (a, b)
    assert readings[2][0] == readings[4][0]  # nothing moved while down
    assert readings[-1][0] > readings[-2][0] and readings[-1][2] == 1  # moving again


def test_an_unchanged_fault_set_leaves_counters_alone(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: d, kind: ib-port-down, target: mlx5_0/1}\n"),
                    0.0)
    again = carry(state, replace(with_faults(tmp_path, "  - {name: d, kind: ib-port-down, "
                                                       "target: mlx5_0/1}\n")), 30.0)
    assert again.hcas == state.hcas and again.faults == state.faults


def test_a_fleet_campaign_through_the_profile(tmp_path: Path) -> None:
    """One profile for 100 nodes: a 5 % fault is selected on the same few of them each time."""
    path = tmp_path / "fleet.yaml"
    path.write_text((SHIPPED_PROFILES / "t4.yaml").read_text() + "faults:\n"
                    "  - {name: campaign, kind: gpu-lost, target: gpu0, fraction: 0.05}\n")

    def picked() -> list[str]:
        names = [f"node-{i:03d}" for i in range(100)]
        return [n for n in names if state_of(path, node_name=n).faults[0].selected]

    first = picked()
    assert 1 <= len(first) <= 12 and picked() == first


def test_the_scheduler_survives_its_own_failure(expected_logs: list[str]) -> None:
    """A bug while scheduling stops transitions until the next view, never the daemon."""
    import trio
    import trio.testing

    from mokkafs.obs.status import Status
    from mokkafs.serve.faults import FaultScheduler

    expected_logs.append("fault scheduling failed")

    class Broken:
        changed = trio.Event()
        shown_at = 0.0
        version = 0
        status = Status()

        @property
        def state(self) -> State:
            raise RuntimeError("boom")

    async def main() -> None:
        broken = Broken()
        scheduler: FaultScheduler[object] = FaultScheduler(
            broken, lambda: 0.0, trio.sleep)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scheduler.run)
            await trio.testing.wait_all_tasks_blocked()
            assert "boom" in str(broken.status.last_error)  # reported, and still running
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_an_onset_between_the_first_build_and_the_swapper_is_installed_late(
        tmp_path: Path) -> None:
    """The first view shows t=0; by the time the swapper exists the clock says 10. An onset at
    5 is installed (late, as of 5), not skipped for the end at 25."""
    import trio

    from mokkafs.serve.faults import FaultScheduler
    from mokkafs.surfaces import SURFACES
    from mokkafs.tree.assemble import Assembler

    state = applied(with_faults(tmp_path, "  - {name: d, kind: ib-port-down, target: mlx5_0/1, "
                                          "after: 5, for: 20}\n"), 0.0)
    tree, counts = Assembler(SURFACES).build(at(state, 0.0))

    async def main() -> None:
        swapper = swapper_of(tree, state, counts, clock=lambda: 10.0, shown_at=0.0)

        async def never(when: float) -> None:  # the clock stays at 10
            await trio.sleep_forever()

        scheduler = FaultScheduler(swapper, lambda: 10.0, never)
        installed = swapper.changed
        async with trio.open_nursery() as nursery:
            nursery.start_soon(scheduler.run)
            with trio.fail_after(30):
                await installed.wait()
            assert swapper.shown_at == 5.0
            assert port_file(swapper.holder.tree, state, "state") == "1: DOWN\n"
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_transition_that_cannot_be_built_is_tried_once(tmp_path: Path,
                                                         expected_logs: list[str]) -> None:
    """Builds are pure: a view that failed to build ahead of its time would fail again at its
    time, so the scheduler reports it once and waits for a new view."""
    import trio
    import trio.testing

    from mokkafs.serve.faults import FaultScheduler
    from mokkafs.surfaces import SURFACES
    from mokkafs.tree.assemble import Assembler

    expected_logs.append("building the view for a fault transition failed")
    state = applied(with_faults(tmp_path, "  - {name: d, kind: ib-port-down, target: mlx5_0/1, "
                                          "after: 5, for: 20}\n"), 0.0)
    tree, counts = Assembler(SURFACES).build(at(state, 0.0))
    builds: list[str] = []

    def broken(s: State, previous: Tree | None) -> tuple[Tree, dict[str, int]]:
        builds.append(s.source)
        raise RuntimeError("a surface bug")

    async def main() -> None:
        swapper = swapper_of(tree, state, counts, build=broken, clock=lambda: 10.0,
                             shown_at=0.0)
        status = swapper.status

        async def never(when: float) -> None:
            await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(FaultScheduler(swapper, lambda: 10.0, never).run)
            with trio.fail_after(30):
                while status.apply_errors.get("build", 0) == 0:
                    await trio.testing.wait_all_tasks_blocked()
                    await trio.sleep(0)  # noqa: ASYNC115 (let a worker thread's result in)
            for _ in range(20):  # time for a second attempt, were there one
                await trio.to_thread.run_sync(lambda: None)
                await trio.testing.wait_all_tasks_blocked()
            assert len(builds) == 1 and status.apply_errors == {"build": 1}
            assert swapper.version == 0
            nursery.cancel_scope.cancel()

    trio.run(main)


# -- what a review found: overlaps, orders, shared links, drivers, removals, RoCE -------------

def test_overlapping_downs_of_a_port_down_it_once(tmp_path: Path) -> None:
    """A fault on the port and one on its HCA, overlapping: the counters stop once for the
    whole stretch (never going back), and the link went down once."""
    state = applied(with_faults(tmp_path,
                                "  - {name: a, kind: ib-port-down, target: mlx5_0/1, after: 5, "
                                "for: 20}\n"
                                "  - {name: b, kind: ib-port-down, target: mlx5_0, after: 10, "
                                "for: 20}\n"), 0.0)
    readings = []
    for t in range(0, 45, 1):
        traffic = at(state, float(t)).hcas[0].ports[0].traffic
        readings.append((counters.counter(traffic, "port_xmit_data", float(t)),
                         counters.counter(traffic, "link_downed", float(t))))
    assert all(a <= b for a, b in itertools.pairwise(readings)), readings
    rate = state.hcas[0].ports[0].traffic.xmit_bytes_per_sec
    assert readings[44] == (math.floor(rate * (44 - 25) / 4), 1)  # down from 5 s to 30 s
    assert port_file(tree_of(at(state, 40.0)), state, "counters/link_downed", now=40.0) == "1\n"


def test_a_lost_gpus_port_is_down_whatever_a_degraded_link_says(tmp_path: Path) -> None:
    for first, second in itertools.permutations(
            ["{name: l, kind: gpu-lost, target: gpu0}",
             "{name: p, kind: pcie-degraded, target: gpu0, gen: 4}"]):
        state = applied(with_faults(tmp_path, f"  - {first}\n  - {second}\n"), 0.0)
        now = at(state, 1.0)
        assert now.function(now.function("0000:1b:00.0").parent or "").link.current_width == 0


def test_both_functions_of_a_dual_port_hca_share_a_degraded_link(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: p, kind: pcie-degraded, target: mlx5_1, "
                                          "gen: 3, width: 8}\n"), 0.0)
    now = at(state, 1.0)
    tree = tree_of(now)
    for bdf in ("0000:29:00.0", "0000:29:00.1"):
        fn = now.function(bdf)
        assert (fn.link.current_gen, fn.link.current_width) == (3, 8), bdf
        assert read(tree, f"{fn.path}/current_link_width") == "8\n"
    assert now.function("0000:18:00.0").link.current_width == 16  # another card's stays


@pytest.mark.parametrize(("profile", "faults", "kept"), [
    ("t4", "".join(f"  - {{name: r{i}, kind: gpu-removed, target: gpu{i}}}\n" for i in range(4)),
     ["sys/module/nvidia", "sys/bus/pci/drivers/nvidia", "proc/driver/nvidia/version",
      "proc/driver/nvidia/gpus"]),
    ("h100", "".join(f"  - {{name: r{i}, kind: hca-removed, target: mlx5_{i}}}\n"
                     for i in range(12)),
     ["sys/module/mlx5_core", "sys/module/nvidia_peermem", "sys/bus/pci/drivers/mlx5_core",
      "sys/class/misc/rdma_cm", "dev/infiniband/rdma_cm", "sys/class/infiniband"]),
])
def test_removing_every_device_of_a_driver_leaves_it_loaded(
        tmp_path: Path, profile: str, faults: str, kept: list[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text((SHIPPED_PROFILES / f"{profile}.yaml").read_text() + "faults:\n" + faults)
    state = applied(state_of(path), 0.0)
    whole, removed = tree_of(replace(state, faults=())), tree_of(at(state, 1.0))
    for p in kept:
        assert whole.resolve(p) is not None and removed.resolve(p) is not None, p
    assert read(removed, "proc/modules") == read(whole, "proc/modules")
    assert read(removed, "proc/devices") == read(whole, "proc/devices")


def test_an_hcas_ports_count_nothing_while_it_is_removed(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, "  - {name: h, kind: hca-removed, target: mlx5_0, "
                                          "after: 10, for: 20}\n"), 0.0)
    rate = state.hcas[0].ports[0].traffic.xmit_bytes_per_sec
    back = tree_of(at(state, 40.0))
    assert port_file(back, state, "counters/port_xmit_data", now=40.0) == \
        f"{math.floor(rate * 20 / 4)}\n"  # 40 s, less the 20 s it was gone
    assert port_file(back, state, "counters/link_downed", now=40.0) == "1\n"
    assert port_file(back, state, "counters/link_downed", "mlx5_3", now=40.0) == "0\n"


def test_a_roce_port_goes_down_as_mlx5_reports_it(tmp_path: Path) -> None:
    path = tmp_path / "roce.yaml"
    path.write_text(H100.replace("  rate_gbps: 400\n", "  rate_gbps: 400\n"
                                 "  link_layer: Ethernet\n", 1)
                    + "faults:\n  - {name: d, kind: ib-port-down, target: mlx5_0/1, "
                      "cable: true}\n")
    state = applied(state_of(path), 0.0)
    tree = tree_of(at(state, 1.0))
    assert port_file(tree, state, "link_layer") == "Ethernet\n"
    assert port_file(tree, state, "state") == "1: DOWN\n"
    assert port_file(tree, state, "phys_state") == "3: Disabled\n"  # cable or not
    assert port_file(tree, state, "rate") == "40 Gb/sec (4X QDR)\n"
