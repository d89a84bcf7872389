"""Kept PCI functions (``pci_functions``, what ``mokkafs capture`` keeps verbatim): served as
given, below the bridge they name, and refused with the field and the fix where wrong."""

from __future__ import annotations

import pytest

from mokkafs.errors import ProfileError
from mokkafs.profile.compile import Options
from mokkafs.profile.resolve import compile_text
from mokkafs.tree.nodes import File
from tests.helpers.profiles import tree_of

BASE = """\
system: {num_devices: 0}
pcie_topology: {root_complexes: [{id: pci0000:00, numa_node: -1}], iommu: false}
machine: {sockets: 1, cores_per_socket: 2}
pci_functions:
"""
BRIDGE = """\
  - bdf: "0000:00:01.0"
    root: pci0000:00
    driver: pcieport
    attributes: {vendor: "0x8086\\n", class: "0x060400\\n", secondary_bus_number: "1\\n",
                 subordinate_bus_number: "1\\n"}
    config: "8680"
    config_size: 256
"""
NIC = """\
  - bdf: "0000:01:00.0"
    root: pci0000:00
    parent: "0000:00:01.0"
    attributes: {vendor: "0x1af4\\n", irq: "11\\n", resource: "0x0 0x0 0x0\\n"}
"""


def test_kept_functions_are_served_verbatim_below_their_bridge() -> None:
    state = compile_text(BASE + BRIDGE + NIC, "p.yaml", Options(node_name="n"))
    tree = tree_of(state)
    nic = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    for name, data in (("vendor", b"0x1af4\n"), ("irq", b"11\n"), ("config", b"")):
        entry = tree.resolve(f"{nic}/{name}")
        assert entry is not None and isinstance(entry.node, File)
        assert entry.node.content == data
    assert tree.resolve(f"{nic}/driver") is None  # no driver: no link
    assert state.function("0000:01:00.0").path == nic
    assert state.function("0000:00:01.0").config == bytes.fromhex("8680") + bytes(254)
    assert state.pci_drivers == ("pcieport",)
    assert state.function("0000:01:00.0").raw == (
        ("irq", b"11\n"), ("resource", b"0x0 0x0 0x0\n"), ("vendor", b"0x1af4\n"))


@pytest.mark.parametrize(("text", "where"), [
    (BASE + NIC, "pci_functions[0].parent"),  # no such bridge
    (BASE + BRIDGE + BRIDGE, "pci_functions[1].bdf"),  # twice
    (BASE + BRIDGE.replace("vendor:", "config:"), "pci_functions[0].attributes"),
    (BASE + BRIDGE.replace('"8680"', '"868"'), "pci_functions[0].config"),
])
def test_wrong_kept_functions_name_the_field(text: str, where: str) -> None:
    with pytest.raises(ProfileError) as err:
        compile_text(text, "p.yaml", Options(node_name="n"))
    assert where in str(err.value)
