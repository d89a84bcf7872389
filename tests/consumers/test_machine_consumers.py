"""The machine's CPUs and NUMA nodes as their consumers read them, against real mounts:
readers written to cadvisor's, the kubelet topology manager's and DRA's logic
(tests/helpers/machine.py), hwloc's lstopo, lscpu and numactl with the view over /sys, what a
process is told of its CPUs, and a hot swap of the CPU count seen whole."""

from __future__ import annotations

import errno
import functools
import os
import re
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.consumers import in_namespace
from tests.helpers.live import live_mount, profile_text, rename_over
from tests.helpers.machine import cadvisor_nodes, numa_info, parse_list, pcie_root_by_cpu
from tests.helpers.mounts import SHIPPED_PROFILES, Mount, mokkafs_mount, wait_for
from tests.helpers.pass_mode import PASS_MODE
from tests.helpers.profiles import state_of
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.consumers

REPO = SHIPPED_PROFILES.parents[1]
NVML_GB200 = REPO / "tests/data/nvml-mock/gb200.yaml"
PROFILES = {"h100": "h100", "gb200": "gb200", "nvml-mock/gb200": str(NVML_GB200)}


@pytest.fixture(scope="module", params=sorted(PROFILES))
def mounted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            ) -> Iterator[tuple[str, Mount]]:
    name: str = request.param
    mnt = tmp_path_factory.mktemp("machine") / "mnt"
    with mokkafs_mount(mnt, ["--profile", PROFILES[name], "--node-name", "node-a"]) as mount:
        yield name, mount


def over_sys(mount: Mount, command: str) -> str:
    """``command`` in a mount namespace with the view as /sys and its cpuinfo and meminfo
    over /proc's."""
    root = shlex.quote(str(mount.sys.parent))
    return in_namespace(f"mount --bind {root}/sys /sys && "
                        f"mount --bind {root}/proc/cpuinfo /proc/cpuinfo && "
                        f"mount --bind {root}/proc/meminfo /proc/meminfo && {command}")


@pytest.mark.once  # static content, which both modes serve alike
def test_cadvisor_kubelet_and_dra_see_every_node_and_cpu_the_functions_name(
        mounted: tuple[str, Mount]) -> None:
    name, mount = mounted
    state = state_of(Path(PROFILES[name]) if "/" in name else name)
    nodes = cadvisor_nodes(mount.sys)
    cpus = {cpu for node in nodes for cpu in node.cpus}
    assert cpus == set(range(len(state.machine.cpus)))
    distances = numa_info(mount.sys)
    for fn in state.functions:
        d = mount.sys / "bus/pci/devices" / fn.bdf
        numa = int((d / "numa_node").read_text())
        assert numa == -1 or numa in distances, (fn.bdf, numa)  # the topology manager knows it
        assert parse_list((d / "local_cpulist").read_text()) <= cpus, fn.bdf
    roots = pcie_root_by_cpu(mount.sys)  # raises as DRA fails on a CPU the machine lacks
    assert set(roots) <= cpus
    for node in nodes:
        assert distances[node.id][node.id] == 10
        assert node.memory_kib > 0 or not node.cpus  # a Grace GPU's block: empty nodes
        assert {c[0] for c in node.caches} == ({1, 2, 3} if node.cpus else set())
        packages = {pkg for pkg, _ in node.cpus.values()}
        assert len(packages) <= 1, (node.id, packages)
    if name == "gb200":  # each GPU's memory a block of 8 nodes without CPUs, HBM in the first
        assert [n.id for n in nodes if not n.cpus] == list(range(2, 34))
        assert [n.id for n in nodes if not n.cpus and n.memory_kib] == [2, 10, 18, 26]


@pytest.mark.once  # static content, which both modes serve alike
def test_lstopo_shows_the_packages_with_their_gpus_and_nics(mounted: tuple[str, Mount]) -> None:
    name, mount = mounted
    tool = require_tool("lstopo-no-graphics")
    state = state_of(Path(PROFILES[name]) if "/" in name else name)
    out = in_namespace(f"HWLOC_FSROOT={shlex.quote(str(mount.sys.parent))} {tool} "
                       "--of console")
    packages = re.split(r"^\s*Package L#\d+", out, flags=re.M)[1:]
    cpu_nodes = [n for n in state.machine.nodes if n.cpus]
    assert len(packages) == len(cpu_nodes), out
    for node in state.machine.nodes:  # a GPU's memory nodes too (hwloc groups them apart)
        assert re.search(rf"NUMANode L#\d+ \(P#{node.id}[ )]", out), node.id
    for pkg, node in zip(packages, cpu_nodes, strict=True):
        numa = {int(x) for x in re.findall(r"NUMANode L#\d+ \(P#(\d+)", pkg)}
        assert node.id in numa
        for fn in state.functions:
            if fn.kind in ("gpu", "hca") and fn.numa_node == node.id:
                # (lstopo leaves domain 0000 out)
                assert re.search(rf"PCI ({fn.bdf[:5]})?{fn.bdf[5:]} ", pkg), (fn.bdf, node.id)


@pytest.mark.once  # static content, which both modes serve alike
def test_lscpu_and_numactl_show_the_profiles_machine(mounted: tuple[str, Mount]) -> None:
    name, mount = mounted
    require_tool("numactl")
    state = state_of(Path(PROFILES[name]) if "/" in name else name)
    m = state.machine
    out = over_sys(mount, "lscpu && echo ---- && numactl --hardware")
    lscpu, numactl = out.split("----\n")
    fields = dict(re.findall(r"^([^:\n]+):\s+(.*)$", lscpu, flags=re.M))
    cores = {(c.package, c.core) for c in m.cpus}
    packages = {c.package for c in m.cpus}
    assert fields["CPU(s)"] == str(len(m.cpus))
    assert fields["Socket(s)"] == str(len(packages))
    assert fields["Core(s) per socket"] == str(len(cores) // len(packages))
    assert fields["Thread(s) per core"] == str(len(m.cpus) // len(cores))
    assert fields["Model name"] == ("Neoverse-V2" if state.platform.arch == "aarch64"
                                    else m.model.name)
    ids = [n.id for n in m.nodes]
    assert f"available: {len(ids)} nodes" in numactl
    for node in m.nodes:
        listed = re.search(rf"^node {node.id} cpus:(.*)$", numactl, flags=re.M)
        assert listed and {int(x) for x in listed.group(1).split()} == set(node.cpus)
        row = re.search(rf"^\s*{node.id}:((\s+\d+)+)\s*$", numactl, flags=re.M)
        assert row and [int(x) for x in row.group(1).split()] == list(node.distance)


@pytest.mark.once  # static content, which both modes serve alike
def test_a_process_is_told_the_simulated_count_and_keeps_its_own_affinity(
        tmp_path: Path) -> None:
    """The decision of docs/machine.md: sysconf (os.cpu_count(), ``nproc --all``) counts the
    view's CPUs; the scheduler's answers (``nproc``, sched_getaffinity) stay the host's, and
    pinning to a CPU the host lacks fails."""
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--node-name", "a"]) as mount:
        _told(mount)


def _told(mount: Mount) -> None:
    own = sorted(os.sched_getaffinity(0))
    script = ("import os\nprint(os.cpu_count())\nprint(sorted(os.sched_getaffinity(0)))\n"
              "try:\n    os.sched_setaffinity(0, {100})\n    print('pinned')\n"
              "except OSError as e:\n    print(e.errno)\n")
    out = over_sys(mount, f"nproc && nproc --all && python3 -c {shlex.quote(script)}").split("\n")
    assert out[0] == str(len(own))
    assert out[1] == "224" and out[2] == "224"
    assert out[3] == str(own)
    assert out[4] == str(errno.EINVAL)  # CPU 100 is not the host's


def test_no_machine_shows_the_hosts_cpus_through(tmp_path: Path) -> None:
    """``mokkafs mount --no-machine`` (docs/machine.md): the profile asks for its machine, the
    command line turns it off, and the view's cpu/ is the host's, passed through."""
    host = Path("/sys/devices/system/cpu")
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--node-name", "a",
                                          "--no-machine"]) as mount:
        cpu = mount.sys / "devices/system/cpu"
        assert (cpu / "online").read_text() == (host / "online").read_text() != "0-223\n"
        assert sorted(n for n in os.listdir(cpu) if re.fullmatch(r"cpu\d+", n)) == sorted(
            n for n in os.listdir(host) if re.fullmatch(r"cpu\d+", n))
        assert not (mount.sys.parent / "proc/cpuinfo").exists()
        assert not (mount.sys.parent / "proc/meminfo").exists()


HALF = [("0-63,128-191", "0-31,64-95"), ("64-127,192-255", "32-63,96-127")]


def test_a_swap_of_the_cpu_count_shows_whole(tmp_path: Path) -> None:
    """a100's 256 CPUs become 128 and back: every read of ``online`` is one generation's,
    whenever the swap comes. In no-open mode, where the kernel's caches are told to forget
    in order (docs/machine.md), a listing of ``cpu/`` between two reads of ``online`` that
    agree holds every CPU they name. (A reader stalled between its read of ``online`` and
    its listing while a whole swap from 256 to 128 goes by sees the old ``online`` and the
    new ``cpu/``, as a reader on a real node may across a hot-remove: the second read shows
    it.) Keep-cache mode answers each request from the tree in force, so two reads (or a
    listing's two getdents) that straddle a swap may see one generation each, as kernfs's
    listings may during a hot-unplug."""
    ordered = PASS_MODE != "keep-cache"
    full = profile_text("a100")
    half = full
    for old, new in HALF:
        half = half.replace(old, new)
    torn: list[str] = []
    # (the epoch a reader's round began in, the CPUs its listing held): each generation is
    # waited for in an epoch of its own, begun once the kernel has heard all of its swap
    epoch = [0]
    seen: set[tuple[int, int]] = set()
    checked = [0]  # listings between two reads of online that agree
    with live_mount(tmp_path) as live:
        base = live.mount.sys / "devices/system"
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                began = epoch[0]
                online = parse_list((base / "cpu/online").read_text())
                listed = {int(n[3:]) for n in os.listdir(base / "cpu")
                          if re.fullmatch(r"cpu\d+", n)}
                again = parse_list((base / "cpu/online").read_text())
                seen.add((began, len(listed)))
                if len(online) not in (128, 256):
                    torn.append(f"online has {len(online)}: not one generation's")
                elif ordered and online == again:
                    checked[0] += 1
                    if not online <= listed:
                        torn.append(f"online has {len(online)}, cpu/ lists {len(listed)}")

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            generation = live.generation()
            for text, count in ((half, 128), (full, 256), (half, 128), (full, 256)):
                rename_over(live, text)
                generation += 1
                live.wait_generation(generation)
                epoch[0] += 1
                wait_for(functools.partial(set.__contains__, seen, (epoch[0], count)), 20,
                         f"a reader seeing {count} CPUs")
        finally:
            stop.set()
            thread.join()
    assert not torn, torn[:5]
    assert checked[0] or not ordered  # (the check ran)
