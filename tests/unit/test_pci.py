"""PCI attribute formats against the kernel's, with values taken from the profiles."""

from __future__ import annotations

import errno
import os
import struct

from mokkafs.surfaces.pci import cpulist, cpumask, modalias
from mokkafs.surfaces.pci_config import config_space, resource_text
from mokkafs.tree.nodes import File, Symlink
from tests.helpers.profiles import H100_GPU0, H100_NIC0, device_path, state_of, tree_of


def read(tree: object, path: str) -> bytes:
    entry = tree.resolve(path)  # type: ignore[attr-defined]
    assert entry is not None, path
    assert isinstance(entry.node, File)
    return entry.node.read(0.0)


def test_gpu_attributes_h100() -> None:
    tree = tree_of(state_of("h100"))
    d = device_path(H100_GPU0)
    assert read(tree, f"{d}/vendor") == b"0x10de\n"
    assert read(tree, f"{d}/device") == b"0x2330\n"
    assert read(tree, f"{d}/subsystem_vendor") == b"0x10de\n"
    assert read(tree, f"{d}/subsystem_device") == b"0x16c1\n"
    assert read(tree, f"{d}/class") == b"0x030200\n"
    assert read(tree, f"{d}/revision") == b"0xa1\n"
    assert read(tree, f"{d}/numa_node") == b"0\n"
    assert read(tree, f"{d}/local_cpulist") == b"0-55,112-167\n"
    assert read(tree, f"{d}/current_link_speed") == b"32.0 GT/s PCIe\n"
    assert read(tree, f"{d}/current_link_width") == b"16\n"
    assert read(tree, f"{d}/modalias") == (
        b"pci:v000010DEd00002330sv000010DEsd000016C1bc03sc02i00\n")
    uevent = read(tree, f"{d}/uevent").decode()
    assert "DRIVER=nvidia\n" in uevent and "PCI_ID=10DE:2330\n" in uevent
    assert "PCI_SLOT_NAME=0000:1b:00.0\n" in uevent


def test_modes_follow_sysfs() -> None:
    tree = tree_of(state_of("h100"))
    d = device_path(H100_GPU0)
    modes = {name: tree.resolve(f"{d}/{name}").node.mode  # type: ignore[union-attr]
             for name in ("vendor", "numa_node", "config", "remove", "resource")}
    assert modes == {"vendor": 0o444, "numa_node": 0o644, "config": 0o644, "remove": 0o220,
                     "resource": 0o444}


def test_links_are_kernel_shaped() -> None:
    tree = tree_of(state_of("h100"))

    def target(path: str) -> str:
        node = tree.resolve(path).node  # type: ignore[union-attr]
        assert isinstance(node, Symlink)
        return node.target

    gpu, nic = device_path(H100_GPU0), device_path(H100_NIC0)

    def rel(path: str, link: str) -> str:  # what a kernel link from ``link`` to ``path`` is
        return os.path.relpath(path, os.path.dirname(link))

    link = f"sys/bus/pci/devices/{H100_GPU0}"
    assert target(link) == rel(gpu, link)
    assert target(f"{gpu}/driver") == rel("sys/bus/pci/drivers/nvidia", f"{gpu}/driver")
    assert target(f"{gpu}/subsystem") == rel("sys/bus/pci", f"{gpu}/subsystem")
    link = f"sys/bus/pci/drivers/nvidia/{H100_GPU0}"
    assert target(link) == rel(gpu, link) == "../../../../devices/pci0000:15/0000:15:01.0/" \
        "0000:16:00.0/0000:17:01.0/0000:1b:00.0"
    link = f"sys/bus/pci/drivers/mlx5_core/{H100_NIC0}"
    assert target(link) == rel(nic, link)
    bridge = state_of("h100").function(H100_GPU0).parent
    assert target(f"sys/bus/pci/drivers/pcieport/{bridge}") == rel(
        os.path.dirname(gpu), f"sys/bus/pci/drivers/pcieport/{bridge}")


def test_config_space_matches_text_attributes() -> None:
    state = state_of("h100")
    for fn in state.functions:
        cfg = config_space(fn)
        assert len(cfg) == 4096
        vendor, device = struct.unpack_from("<HH", cfg, 0)
        assert (vendor, device) == (fn.vendor, fn.device)
        assert struct.unpack_from("<I", cfg, 8)[0] >> 8 == fn.class_code
        assert cfg[8] == fn.revision
        ids = 0x2C if fn.bridge is None else 0x84  # bridges: SSVID capability at 0x80
        assert struct.unpack_from("<HH", cfg, ids) == (fn.subsystem_vendor, fn.subsystem_device)
        assert cfg[0x3C] == fn.irq
        cap = cfg[0x34]
        assert cfg[cap] == 0x10  # PCI Express
        lnksta = struct.unpack_from("<H", cfg, cap + 0x12)[0]
        assert lnksta & 0xF == fn.link.current_gen
        assert (lnksta >> 4) & 0x3F == fn.link.current_width
        for bar in fn.bars:
            low = struct.unpack_from("<I", cfg, 0x10 + 4 * bar.index)[0]
            high = struct.unpack_from("<I", cfg, 0x14 + 4 * bar.index)[0] if bar.is_64bit else 0
            assert ((high << 32) | (low & ~0xF)) == bar.address


def test_resource_lines_carry_bars_and_kernel_flags() -> None:
    gpu = state_of("h100").function(H100_GPU0)
    lines = resource_text(gpu).decode().splitlines()
    assert len(lines) == 13
    start, end, flags = (int(x, 16) for x in lines[0].split())
    assert end - start + 1 == 16 << 20 and flags == 0x40200
    start, end, flags = (int(x, 16) for x in lines[1].split())
    assert end - start + 1 == 128 << 30 and flags == 0x14220C
    assert lines[2] == "0x0000000000000000 0x0000000000000000 0x0000000000000000"


def test_cpulist_and_mask_formats() -> None:
    assert cpulist((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"
    assert cpumask((0, 1, 2, 3), 4) == "f"
    assert cpumask(tuple(range(40)), 40) == "ff,ffffffff"
    assert cpumask(tuple(range(32, 64)), 64) == "ffffffff,00000000"


def test_nvswitch_and_hca_identity() -> None:
    state = state_of("h100")
    sw = state.function("0000:a5:00.0")
    assert (sw.vendor, sw.device, sw.class_code, sw.driver) == (0x10DE, 0x22A3, 0x068000,
                                                                "nvidia-nvswitch")
    hca = state.function(H100_NIC0)
    assert modalias(hca).startswith("pci:v000015B3d00001021")
    assert state_of("a100").function("0000:c4:00.0").device == 0x1AF1


def test_bus_directory_has_only_simulated_devices() -> None:
    state = state_of("t4")
    tree = tree_of(state)
    listing = tree.resolve("sys/bus/pci/devices")
    assert listing is not None
    listed = [name for name, _ in listing.children]
    assert [b for b in listed if state.function(b).kind == "gpu"] == [
        "0000:3b:00.0", "0000:5e:00.0", "0000:86:00.0", "0000:af:00.0"]
    assert listed == sorted(fn.bdf for fn in state.functions)  # and the bridges above them
    assert tree.resolve("sys/class/infiniband") is None


def test_power_directory_and_state_as_kernel_6_shows_them() -> None:
    tree = tree_of(state_of("h100"))
    gpu = device_path(H100_GPU0)
    assert read(tree, f"{gpu}/power_state") == b"D0\n"
    assert read(tree, f"{gpu}/power/control") == b"on\n"
    assert read(tree, f"{gpu}/power/runtime_status") == b"active\n"
    assert read(tree, f"{gpu}/power/runtime_suspended_time") == b"0\n"
    active = tree.resolve(f"{gpu}/power/runtime_active_time")
    assert active is not None and isinstance(active.node, File)
    assert active.node.read(12.34) == b"12300\n"  # ms since the node started, per 100 ms step
    delay = tree.resolve(f"{gpu}/power/autosuspend_delay_ms")
    assert delay is not None and isinstance(delay.node, File) and delay.node.error == errno.EIO
