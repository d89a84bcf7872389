"""The machine's identity and the drivers' own files: DMI, /sys/module, /proc/modules,
/proc/driver/nvidia, rdma_cm; formats against the kernel's and the NVIDIA driver's, values
from the profile, and what the consumers parse out of them."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from mokkafs.state import HostFacts
from mokkafs.surfaces.dmi import modalias
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import CharDevice, File, Symlink
from tests.helpers.profiles import ALL_PROFILES, HOST_PROC_DEVICES, profile_id, state_of, tree_of

DMI = "sys/class/dmi/id"
HOST_MODULES = ("fuse 159744 3 - Live 0x0000000000000000\n"
                "nvidia 100 0 - Live 0x0000000000000000 (PO)\n"
                "overlay 151552 0 - Live 0x0000000000000000\n")


def read(tree: Tree, path: str) -> str:
    entry = tree.resolve(path)
    if entry is not None and isinstance(entry.node, Symlink):  # class links
        head, _, tail = path.partition("/id/")
        entry = tree.resolve(f"sys/devices/virtual/dmi/id/{tail}") if head == \
            "sys/class/dmi" else None
    assert entry is not None and isinstance(entry.node, File), path
    return entry.node.read(0.0).decode()


def dmi(tree: Tree, name: str) -> str:
    return read(tree, f"sys/devices/virtual/dmi/id/{name}")


def gpu_machine_label(product_name: str) -> str:
    """GPU Feature Discovery's nvidia.com/gpu.machine (internal/lm/machine-type.go)."""
    return product_name.strip().replace(" ", "-")


@pytest.mark.parametrize(("profile", "label"), [
    ("h100", "DGXH100"), ("a100", "DGXA100-920-23687-2530-000"), ("h200", "DGXH200"),
    ("b200", "DGXB200"), ("gb200", "GB200-NVL"), ("l40s", "Simulated-GPU-node")])
def test_dmi_gives_gfd_its_machine_label(profile: str, label: str) -> None:
    tree = tree_of(state_of(profile))
    assert gpu_machine_label(dmi(tree, "product_name")) == label
    link = tree.resolve(DMI)
    assert link is not None and isinstance(link.node, Symlink)
    assert link.node.target == "../../devices/virtual/dmi/id"


def test_dmi_attributes_modes_and_modalias() -> None:
    state = state_of("h100")
    tree = tree_of(state)
    base = "sys/devices/virtual/dmi/id"
    assert dmi(tree, "sys_vendor") == "NVIDIA\n"
    assert dmi(tree, "board_name") == "DGXH100\n" and dmi(tree, "chassis_type") == "23\n"
    assert tree.resolve(f"{base}/product_version") is None  # the firmware leaves it empty
    for name in ("product_serial", "product_uuid", "board_serial", "chassis_serial"):
        entry = tree.resolve(f"{base}/{name}")
        assert entry is not None and entry.node.mode == 0o400, name  # type: ignore[union-attr]
    for name in ("product_name", "bios_vendor", "modalias"):
        assert tree.resolve(f"{base}/{name}").node.mode == 0o444  # type: ignore[union-attr]
    alias = dmi(tree, "modalias")
    assert alias.startswith("dmi:bvnAmericanMegatrendsInternational,LLC.:bvr1.6.7:")
    assert ":svnNVIDIA:pnDGXH100:" in alias and alias.endswith(":\n")
    assert " " not in alias.strip() and alias.strip() == modalias(state.platform)
    assert dmi(tree, "uevent") == f"MODALIAS={alias}"
    assert uuid.UUID(dmi(tree, "product_uuid").strip())


def test_serials_and_uuid_are_the_nodes_own() -> None:
    seen = set()
    for name, index in (("node-a", None), ("node-b", None), ("node-a", 7)):
        tree = tree_of(state_of("h100", node_name=name, node_index=index))
        values = tuple(dmi(tree, f) for f in ("product_serial", "product_uuid", "board_serial"))
        assert values[0].startswith("1654") and len(set(values)) == 3
        seen.add(values)
    assert len(seen) == 3
    again = tree_of(state_of("h100", node_name="node-a"))
    assert (dmi(again, "product_serial"), dmi(again, "product_uuid")) in {
        (v[0], v[1]) for v in seen}


def test_modules_carry_the_driver_version_and_peermem_only_with_infiniband() -> None:
    state = state_of("h100")
    tree = tree_of(state)
    version = state.driver.version
    for name in ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_peermem"):
        assert read(tree, f"sys/module/{name}/version") == f"{version}\n"
        assert read(tree, f"sys/module/{name}/initstate") == "live\n"
        assert read(tree, f"sys/module/{name}/taint") == "O\n"  # open modules: out of tree
    assert read(tree, "sys/module/mlx5_core/version") == "24.10-1.1.4\n"  # DOCA-OFED's
    assert tree.resolve("sys/module/ib_core/version") is None
    assert tree.resolve("sys/module/nvidia/parameters") is None  # NVreg_* have mode 0
    assert read(tree, "sys/module/nvidia_peermem/parameters/peerdirect_support") == "0\n"
    holders = tree.resolve("sys/module/nvidia/holders")
    assert holders is not None
    names = sorted(n for n, _ in holders.children)
    assert names == ["nvidia_modeset", "nvidia_peermem", "nvidia_uvm"]
    assert read(tree, "sys/module/nvidia/refcnt") == "3\n"
    link = tree.resolve("sys/bus/pci/drivers/nvidia/module")
    assert link is not None and isinstance(link.node, Symlink)
    assert link.node.target == "../../../../module/nvidia"
    link = tree.resolve("sys/module/mlx5_core/drivers/pci:mlx5_core")
    assert link is not None and isinstance(link.node, Symlink)
    assert link.node.target == "../../../bus/pci/drivers/mlx5_core"
    # NVSwitches are bound by the nvidia module's second PCI driver, as lspci -k shows it
    link = tree.resolve("sys/module/nvidia/drivers/pci:nvidia-nvswitch")
    assert link is not None and isinstance(link.node, Symlink)
    switches = tree.resolve("sys/bus/pci/drivers/nvidia-nvswitch")
    assert switches is not None
    assert sorted(n for n, _ in switches.children if n.startswith("0000:")) == sorted(
        fn.bdf for fn in state.functions if fn.kind == "nvswitch")
    assert len(switches.names) > 4 and "module" in switches.names
    bare = tree_of(state_of("l40s"))
    assert bare.resolve("sys/module/nvidia/drivers/pci:nvidia-nvswitch") is None
    assert bare.resolve("sys/module/nvidia_peermem") is None
    assert bare.resolve("sys/module/mlx5_core") is None
    assert read(bare, "sys/module/nvidia/refcnt") == "2\n"


def test_proprietary_modules_are_tainted_p(tmp_path: Path) -> None:
    path = tmp_path / "prop.yaml"
    text = (Path(__file__).parents[2] / "mokkafs/profiles/l40s.yaml").read_text()
    path.write_text(text.replace("system:\n", "system:\n  kernel_modules: proprietary\n", 1))
    state = state_of(path)
    tree = tree_of(state)
    assert read(tree, "sys/module/nvidia/taint") == "PO\n"
    assert read(tree, "proc/driver/nvidia/version").startswith(
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {state.driver.version}  ")


PROC_MODULE_LINE = re.compile(
    r"^(\w+) (\d+) (\d+) (-|(?:\w+,)+) Live 0x[0-9a-f]{16}( \([A-Z]+\))?$")


def test_proc_modules_in_the_kernels_format_with_the_hosts_lines() -> None:
    state = state_of("h100", host=HostFacts(HOST_PROC_DEVICES, proc_modules=HOST_MODULES))
    text = read(tree_of(state), "proc/modules")
    lines = text.splitlines()
    assert all(PROC_MODULE_LINE.match(line) for line in lines), lines
    by_name = {line.split()[0]: line.split() for line in lines}
    assert "fuse" in by_name and "overlay" in by_name  # the host's
    assert [line for line in lines if line.startswith("nvidia ")] == [
        "nvidia 56823808 3 nvidia_modeset,nvidia_uvm,nvidia_peermem, Live "
        "0x0000000000000000 (O)"]  # the host's own nvidia line is replaced
    for name, fields in by_name.items():  # refcount = users listed
        users = [] if fields[3] == "-" else fields[3].rstrip(",").split(",")
        assert int(fields[2]) >= len(users), name
        for user in users:
            assert user in by_name
    # users load after what they use: the kernel lists the newest first
    order = [line.split()[0] for line in lines]
    assert order.index("nvidia_peermem") < order.index("nvidia") < order.index("ib_core")


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_nvidia_procfs_for_every_gpu(path: Path) -> None:
    state = state_of(path)
    tree = tree_of(state)
    version = read(tree, "proc/driver/nvidia/version")
    assert re.match(rf"^NVRM version: NVIDIA UNIX Open Kernel Module for "
                    rf"{state.platform.arch}  {re.escape(state.driver.version)}  Release Build"
                    r"  \(\S+\)  \w{3} \w{3} +\d+ [\d:]+ UTC \d{4}\nGCC version:  gcc version "
                    r".* \n$", version), version
    gpus = tree.resolve("proc/driver/nvidia/gpus")
    assert gpus is not None
    assert sorted(n for n, _ in gpus.children) == sorted(g.bdf for g in state.gpus())
    for fn in state.gpus():
        assert fn.gpu is not None
        info = read(tree, f"proc/driver/nvidia/gpus/{fn.bdf}/information")
        fields = dict(line.split(":", 1) for line in info.splitlines())
        assert {k: v.strip() for k, v in fields.items()} | {"DMA Mask": ""} == {
            "Model": fn.gpu.model, "IRQ": str(fn.irq), "GPU UUID": fn.gpu.uuid,
            "Video BIOS": fn.gpu.vbios.lower(), "Bus Type": "PCIe",
            "DMA Size": fields["DMA Size"].strip(), "DMA Mask": "",
            "Bus Location": fn.bdf, "Device Minor": str(fn.gpu.minor),
            "GPU Firmware": state.driver.version, "GPU Excluded": "No"}
        assert info.startswith(f"Model: \t\t {fn.gpu.model}\nIRQ:   \t\t ")
        assert "\nGPU Excluded:\t No\n" in info
        assert read(tree, f"proc/driver/nvidia/gpus/{fn.bdf}/registry") == 'Binary: ""\n'
    # the UUIDs are the profile's where it gives them (nvidia-smi shows the same)
    assert len({g.gpu.uuid for g in state.gpus() if g.gpu}) == len(state.gpus())


def nv_cap(text: str) -> dict[str, int]:
    """The DRA driver's ParseNVCapDeviceInfo: key: decimal value, per line."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = int(value.strip())
    return out


def test_capabilities_as_the_dra_driver_and_device_plugin_read_them() -> None:
    state = state_of("h100")
    tree = tree_of(state)
    caps = "proc/driver/nvidia/capabilities"
    assert nv_cap(read(tree, f"{caps}/fabric-imex-mgmt")) == {
        "DeviceFileMinor": 4323, "DeviceFileMode": 256, "DeviceFileModify": 1}
    assert nv_cap(read(tree, f"{caps}/mig/config")) == {
        "DeviceFileMinor": 1, "DeviceFileMode": 256, "DeviceFileModify": 1}
    assert nv_cap(read(tree, f"{caps}/mig/monitor"))["DeviceFileMode"] == 0o444
    assert state.major("nvidia-caps") and state.major("nvidia-caps-imex-channels")
    # the device plugin's GetMigCapabilityDevicePaths: Sscanf patterns, in its order
    minors: dict[str, int] = {}
    for line in read(tree, "proc/driver/nvidia-caps/mig-minors").splitlines():
        for pattern in (r"gpu(\d+)/gi(\d+)/ci(\d+)/access (\d+)", r"gpu(\d+)/gi(\d+)/access (\d+)",
                        r"config (\d+)", r"monitor (\d+)"):
            m = re.fullmatch(pattern, line)
            if m:
                minors[line.rsplit(" ", 1)[0]] = int(m.groups()[-1])
                break
    assert minors["config"] == 1 and minors["monitor"] == 2
    assert minors["gpu0/gi0/access"] == 3 and minors["gpu0/gi0/ci0/access"] == 4
    assert minors["gpu1/gi0/access"] == 3 + 135 and len(minors) == 2 + 32 * 15 * 9
    assert len(set(minors.values())) == len(minors)
    assert read(tree, "proc/driver/nvidia-caps/sys-minors") == "fabric-imex-mgmt 4323\n"
    params = read(tree, "proc/driver/nvidia/params")
    assert "ModifyDeviceFiles: 1\n" in params and 'RegistryDwords: ""\n' in params


def test_rdma_cm_is_a_misc_device_with_infiniband_only() -> None:
    tree = tree_of(state_of("h100"))
    node = tree.resolve("dev/infiniband/rdma_cm")
    assert node is not None and isinstance(node.node, CharDevice)
    assert (node.node.major, node.node.minor) == (10, 56)
    assert read(tree, "sys/devices/virtual/misc/rdma_cm/dev") == "10:56\n"
    link = tree.resolve("sys/class/misc/rdma_cm")
    assert link is not None and isinstance(link.node, Symlink)
    assert link.node.target == "../../devices/virtual/misc/rdma_cm"
    assert tree_of(state_of("t4")).resolve("dev/infiniband/rdma_cm") is None
