"""The PCIe hierarchy as the GPU/network stack reads it, against real mounts: lspci draws the
switch tree and decodes every bridge, hwloc puts each GPU and its NIC under one bridge, and
readers written to NCCL's and the DRA driver's logic (tests/helpers/topology.py) pair them.

What each shipped profile is expected to give, and why the exceptions are what the hardware
(or the profile's bus numbers) makes them, is in docs/topology.md.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import topology
from tests.helpers.mounts import Mount, mokkafs_mount
from tests.helpers.profiles import ALL_PROFILES, profile_id, state_of
from tests.helpers.tools import require_tool
from tests.helpers.topology import check_hwloc, partners

pytestmark = pytest.mark.consumers

WITH_IB = [p for p in ALL_PROFILES if state_of(p).hcas]
# Grace trays: every GPU and NIC is alone in a PCI domain of its own, NICs on their Grace's
# NUMA node; NCCL reaches the NIC through the CPU (PHB here; NVML's C2C info makes it P2C).
GRACE = {"profiles/gb200", "profiles/gb300"}
# nvml-mock's a100 numbers six NVSwitches on buses 1-6 and GPU 0 on bus 7 of root 00: no bus
# is left for a switch above GPU 0, so it sits on a root port of its own.
NO_ROOM = {"nvml-mock/a100": {"0000:07:00.0"}}


@pytest.fixture(scope="module")
def h100(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    mnt = tmp_path_factory.mktemp("topology") / "mnt"
    with mokkafs_mount(mnt, ["--profile", "h100", "--node-name", "node-a"]) as mount:
        yield mount


@pytest.mark.parametrize("profile", WITH_IB, ids=profile_id)
def test_nccl_and_dra_pair_every_gpu_with_its_nic(tmp_path: Path, profile: Path) -> None:
    state = state_of(profile, node_name="node-a")
    pid = profile_id(profile)
    with mokkafs_mount(tmp_path / "mnt", ["--profile", str(profile),
                                          "--node-name", "node-a"]) as mount:
        sysroot = str(mount.sys)
        for gpu in state.gpus():
            kinds = {h.name: topology.nccl(sysroot, gpu.bdf, h.name) for h in state.hcas}
            best = min(kinds.values(), key=topology.ORDER.index)
            nearest = [h for h in state.hcas if kinds[h.name] == best]
            roots = {topology.pcie_root(sysroot, h.bdf) for h in nearest}
            gpu_root = topology.pcie_root(sysroot, gpu.bdf)
            if pid in GRACE:
                assert best == topology.PHB, (gpu.bdf, kinds)
                assert all(state.function(h.bdf).numa_node == gpu.numa_node for h in nearest)
                assert gpu_root not in roots  # a domain of its own
            elif gpu.bdf in NO_ROOM.get(pid, ()):
                assert best == topology.PHB and roots == {gpu_root}, (gpu.bdf, kinds)
            else:
                # GPUDirect RDMA's default gate is PXB: this GPU gets it with these NICs
                assert best in (topology.PIX, topology.PXB), (gpu.bdf, kinds)
                assert roots == {gpu_root}, (gpu.bdf, roots)
                if partners(state)[gpu.bdf]:
                    assert sorted(h.name for h in nearest) == sorted(partners(state)[gpu.bdf])


def test_dgx_h100_pairs_as_its_user_guide_says(h100: Mount) -> None:
    """DGX H100 User Guide, Table 6: GPU i's compute NIC (docs/profiles.md)."""
    table = {"0000:1b:00.0": "mlx5_0", "0000:43:00.0": "mlx5_3", "0000:52:00.0": "mlx5_4",
             "0000:61:00.0": "mlx5_5", "0000:9d:00.0": "mlx5_6", "0000:c3:00.0": "mlx5_9",
             "0000:d1:00.0": "mlx5_10", "0000:df:00.0": "mlx5_11"}
    sysroot = str(h100.sys)
    for gpu, nic in table.items():
        assert topology.nccl(sysroot, gpu, nic) == topology.PIX
        nic_bdf = Path(topology.nic_path(sysroot, nic)).name
        assert topology.pcie_root(sysroot, gpu) == topology.pcie_root(sysroot, nic_bdf)
    assert topology.nccl(sysroot, "0000:1b:00.0", "mlx5_1") == topology.PHB  # storage card
    assert topology.nccl(sysroot, "0000:1b:00.0", "mlx5_6") == topology.SYS  # other socket


def test_lspci_draws_the_switch_tree_and_decodes_every_bridge(h100: Mount) -> None:
    state = state_of("h100")
    exe = require_tool("lspci")
    base = [exe, "-A", "linux-sysfs", "-O", f"sysfs.path={h100.sys}/bus/pci"]
    tree = subprocess.run([*base, "-tv"], capture_output=True, text=True, check=True,
                          timeout=60).stdout
    for root in state.roots:
        assert f"[{root.id[3:]}]" in tree
    for fn in state.functions:
        if fn.bridge is None:
            continue
        sec, sub = fn.bridge.secondary, fn.bridge.subordinate
        buses = f"{sec:02x}" if sec == sub else f"{sec:02x}-{sub:02x}"
        assert f"{fn.bdf[8:]}-[{buses}]" in tree, (fn.bdf, tree)
    # a GPU and its NIC hang off two downstream ports of one switch
    assert re.search(r"00\.0-\[17-1b\]--\+-00\.0-\[18\]----00\.0  Mellanox.*\n.*"
                     r"\\-01\.0-\[1b\]----00\.0  NVIDIA", tree), tree
    verbose = subprocess.run([*base, "-vvv"], capture_output=True, text=True, check=True,
                             timeout=60).stdout
    assert "!!!" not in verbose and "<?>" not in verbose
    blocks = verbose.split("\n\n")
    bridges = [b for b in blocks if " PCI bridge: " in b]
    assert len(bridges) == len([fn for fn in state.functions if fn.bridge])
    speeds = {3: "8", 4: "16", 5: "32"}
    for block in bridges:
        fn = state.function(f"0000:{block.split(' ', 1)[0]}")
        assert re.search(r"Express \(v2\) (Root Port|Upstream Port|Downstream Port)", block)
        assert "LnkCap:\tPort #" in block
        link = fn.link  # what the sysfs attributes say, decoded from the config space
        assert (f"LnkSta:\tSpeed {speeds[link.current_gen]}GT/s, "
                f"Width x{link.current_width}") in block
    downstream = [b for b in bridges if "Downstream Port (Slot+)" in b]
    assert downstream and all("PresDet+" in b and "DLActive+" in b for b in downstream)


def test_hwloc_puts_each_gpu_and_its_nic_under_one_bridge(h100: Mount) -> None:
    exe = require_tool("lstopo-no-graphics")
    out = subprocess.run([exe, "-v", "--whole-io"], capture_output=True, text=True, timeout=120,
                         env={"HWLOC_FSROOT": str(h100.path), "PATH": "/usr/bin:/bin"},
                         check=True).stdout
    check_hwloc(out.splitlines(), state_of("h100"))
