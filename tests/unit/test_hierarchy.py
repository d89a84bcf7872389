"""The PCIe hierarchy a profile compiles to: bridges that nest as a kernel's enumeration makes
them, declared and derived switches, empty slots, IOMMU groups, pci_bus class devices, and
the profile errors that name the field."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.state import State
from mokkafs.surfaces.pci_config import config_space
from mokkafs.tree.nodes import File, Symlink
from tests.helpers.profiles import ALL_PROFILES, profile_id, state_of, tree_of


def bus(bdf: str) -> int:
    return int(bdf[5:7], 16)


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_buses_nest_as_the_kernel_numbers_them(path: Path) -> None:
    """Every function sits on its parent bridge's secondary bus (or its root's bus), every
    bridge's range holds exactly the buses below it, and sibling ranges never overlap."""
    state = state_of(path)
    for fn in state.functions:
        if fn.parent is None:
            assert bus(fn.bdf) == int(fn.root[-2:], 16), fn.bdf
            assert fn.path == f"sys/devices/{fn.root}/{fn.bdf}"
            continue
        parent = state.function(fn.parent)
        assert parent.bridge is not None
        assert bus(fn.bdf) == parent.bridge.secondary, fn.bdf
        assert fn.path == f"{parent.path}/{fn.bdf}"
        assert fn.root == parent.root and fn.numa_node == parent.numa_node
    for fn in state.functions:
        if fn.bridge is None:
            continue
        below = {bus(f.bdf) for f in state.functions if f.path.startswith(fn.path + "/")}
        below |= {f.bridge.secondary for f in state.functions
                  if f.bridge and f.path.startswith(fn.path + "/")}
        assert below <= set(range(fn.bridge.secondary, fn.bridge.subordinate + 1)), fn.bdf
        assert fn.bridge.subordinate in below | {fn.bridge.secondary}, fn.bdf
    for a in state.functions:
        for b in state.functions:
            if a is not b and a.bridge and b.bridge and a.parent == b.parent \
                    and a.root == b.root:
                ra = range(a.bridge.secondary, a.bridge.subordinate + 1)
                assert b.bridge.secondary not in ra, (a.bdf, b.bdf)


def test_switch_ports_and_config_space() -> None:
    state = state_of("h100")
    gpu = state.function("0000:1b:00.0")
    down = state.function(gpu.parent or "")
    up = state.function(down.parent or "")
    root_port = state.function(up.parent or "")
    assert [f.bridge.port for f in (down, up, root_port) if f.bridge] == [
        "downstream", "upstream", "root"]
    assert root_port.parent is None and (up.vendor, up.device) == (0x1000, 0xC030)
    assert (root_port.vendor, root_port.device) == (0x8086, 0x352A)
    for fn in (down, up, root_port):
        cfg = config_space(fn)
        assert cfg[0x0E] == 0x01 and struct.unpack_from("<I", cfg, 0x08)[0] >> 8 == 0x060400
        assert cfg[0x18] == bus(fn.bdf) and fn.bridge is not None
        assert (cfg[0x19], cfg[0x1A]) == (fn.bridge.secondary, fn.bridge.subordinate)
        port_type = {"root": 4, "upstream": 5, "downstream": 6}[fn.bridge.port]
        assert (struct.unpack_from("<H", cfg, 0x42)[0] >> 4) & 0xF == port_type
    # the windows of a bridge cover the BARs below it
    assert root_port.bridge and root_port.bridge.prefetchable
    low, high = root_port.bridge.prefetchable
    assert all(low <= bar.address and bar.address + bar.size - 1 <= high
               for bar in gpu.bars if bar.prefetchable)
    tree = tree_of(state)
    entry = tree.resolve(f"{down.path}/secondary_bus_number")
    assert entry is not None and isinstance(entry.node, File)
    assert entry.node.read(0) == b"27\n"  # decimal, as the kernel prints it


def test_pci_bus_class_devices_and_links() -> None:
    state = state_of("h100")
    tree = tree_of(state)
    link = tree.resolve("sys/class/pci_bus/0000:1b")
    assert link is not None and isinstance(link.node, Symlink)
    down = state.function(state.function("0000:1b:00.0").parent or "")
    assert link.node.target == "../../" + down.path.removeprefix("sys/") + "/pci_bus/0000:1b"
    root_bus = tree.resolve("sys/class/pci_bus/0000:15")
    assert root_bus is not None and isinstance(root_bus.node, Symlink)
    assert root_bus.node.target == "../../devices/pci0000:15/pci_bus/0000:15"
    listed = tree.resolve("sys/class/pci_bus")
    assert listed is not None
    expected = {f"{r.id[3:]}" for r in state.roots} | {
        f"{f.bdf[:4]}:{f.bridge.secondary:02x}" for f in state.functions if f.bridge}
    assert {name for name, _ in listed.children} == expected


def test_pcie_cards_sit_on_root_ports_of_their_own() -> None:
    state = state_of("l40s")
    for gpu in state.gpus():
        port = state.function(gpu.parent or "")
        assert port.bridge is not None and port.bridge.port == "root" and port.parent is None


def test_iommu_groups_and_the_switch_that_turns_them_off(tmp_path: Path) -> None:
    state = state_of("h100")
    tree = tree_of(state)
    gpu = state.function("0000:1b:00.0")
    link = tree.resolve(f"{gpu.path}/iommu_group")
    assert link is not None and isinstance(link.node, Symlink)
    group = f"sys/kernel/iommu_groups/{gpu.iommu_group}"
    back = tree.resolve(f"{group}/devices/0000:1b:00.0")
    assert back is not None and isinstance(back.node, Symlink)
    assert len({f.iommu_group for f in state.functions}) == len(state.functions)
    path = tmp_path / "no-iommu.yaml"
    text = (Path(__file__).parents[2] / "mokkafs/profiles/h100.yaml").read_text()
    path.write_text(text.replace("pcie_topology:\n", "pcie_topology:\n  iommu: false\n", 1))
    off = tree_of(state_of(path))
    assert off.resolve("sys/kernel/iommu_groups") is None
    assert off.resolve(f"{gpu.path}/iommu_group") is None


def test_a_node_without_infiniband_keeps_its_layout_with_empty_slots() -> None:
    full, bare = state_of("h100"), state_of("h100", infiniband=False)
    assert not bare.hcas
    gpus = {g.bdf: g.path for g in full.gpus()}
    assert {g.bdf: g.path for g in bare.gpus()} == gpus
    empty = bare.function(full.function("0000:18:00.0").parent or "")
    assert empty.bridge is not None and not empty.bridge.occupied
    assert empty.link.current_width == 0
    cfg = config_space(empty)
    assert struct.unpack_from("<H", cfg, 0x40 + 0x1A)[0] & 0x40 == 0  # no presence
    assert struct.unpack_from("<H", cfg, 0x40 + 0x12)[0] & (1 << 13) == 0  # link down


def declared_switch(text: str) -> str:
    return ("device_defaults: {pci: {device_id: 0x233010DE}}\ndevices:\n"
            '  - {index: 0, pci: {bus_id: "0000:1b:00.0"}}\n'
            '  - {index: 1, pci: {bus_id: "0000:1c:00.0"}}\n' + text)


@pytest.mark.parametrize(("text", "where", "message"), [
    ('pcie_topology:\n  root_complexes:\n    - {id: "pci0000:15", devices: ["0000:1b:00.0", '
     '"0000:1c:00.0"], switches: [{devices: ["0000:1b:00.0", "0000:99:00.0"]}]}\n',
     "pcie_topology.root_complexes[0].switches[0].devices[1]", "not a device below"),
    ('pcie_topology:\n  root_complexes:\n    - {id: "pci0000:1a", devices: ["0000:1b:00.0", '
     '"0000:1c:00.0"], switches: [{devices: ["0000:1b:00.0", "0000:1c:00.0"]}]}\n',
     "pcie_topology.root_complexes[0].switches[0]", "no bus numbers left for this switch"),
    # declared out of bus order: the one without room is switches[0], laid out second
    ('pcie_topology:\n  root_complexes:\n    - {id: "pci0000:15", devices: ["0000:1b:00.0", '
     '"0000:1c:00.0"], switches: [{devices: ["0000:1c:00.0"]}, {devices: ["0000:1b:00.0"]}]}\n',
     "pcie_topology.root_complexes[0].switches[0]", "no bus numbers left for this switch"),
    ('pcie_topology:\n  root_complexes:\n    - {id: "pci0000:15", devices: ["0000:1b:00.0", '
     '"0000:1c:00.0"], switches: [{devices: ["0000:1b:00.0"]}, {devices: ["0000:1b:00.0"]}]}\n',
     "pcie_topology.root_complexes[0].switches[1].devices[0]", "already on switch 0"),
    ('pcie_topology:\n  root_complexes:\n    - {id: "pci0000:15", devices: ["0000:1b:00.0", '
     '"0000:1c:00.0"], switches: [{devices: []}]}\n',
     "pcie_topology.root_complexes[0].switches[0].devices", "at least 1 item"),
])
def test_bad_switches_name_the_field(tmp_path: Path, text: str, where: str,
                                     message: str) -> None:
    path = tmp_path / "switch.yaml"
    path.write_text(declared_switch(text))
    with pytest.raises(ProfileError) as info:
        state_of(path)
    assert message in str(info.value), str(info.value)
    assert any(p.path == where and p.line for p in info.value.problems), info.value.problems


def test_a_declared_switch_is_built_as_declared(tmp_path: Path) -> None:
    path = tmp_path / "switch.yaml"
    path.write_text(declared_switch(
        'pcie_topology:\n  root_complexes:\n    - {id: "pci0000:15", devices: ["0000:1b:00.0", '
        '"0000:1c:00.0"], switches: [{devices: ["0000:1b:00.0", "0000:1c:00.0"]}]}\n'))
    state: State = state_of(path)
    a, b = state.function("0000:1b:00.0"), state.function("0000:1c:00.0")
    assert a.parent != b.parent
    assert state.function(a.parent or "").parent == state.function(b.parent or "").parent
