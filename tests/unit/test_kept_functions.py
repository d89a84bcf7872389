"""Kept PCI functions (``pci_functions``, what ``mokkafs capture`` keeps verbatim): served as
given, below the bridge they name, as the made function with the captured bytes laid over it
(``mokkafs.surfaces.pci_kept``), and refused with the field and the fix where wrong."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mokkafs.errors import ProfileError
from mokkafs.profile.compile import Options
from mokkafs.profile.resolve import compile_text
from mokkafs.surfaces import pci
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import File
from tests.helpers.profiles import state_of, tree_of

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
NIC_PATH = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"


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


def _files(tree: Tree, d: str) -> dict[str, tuple[bytes, int, int]]:
    """Each file of directory ``d``: its content, mode and errno."""
    entry = tree.resolve(d)
    assert entry is not None
    nodes = (tree.entries[ino].node for ino in entry.inodes)
    return {n.name: (n.read(0.0), n.mode, n.error) for n in nodes if isinstance(n, File)}


def test_a_kept_function_serves_what_was_captured_and_what_a_capture_cannot_read() -> None:
    """No made attribute the captured node lacked (a conventional PCI NIC has no link
    attributes; a kept one no ``reset``); the captured ones the made function lacks, with
    the kernel's modes; the write-only ``remove`` and ``rescan``."""
    nic = NIC.replace('irq: "11\\n"', 'irq: "11\\n", reset_method: "flr\\n"')
    state = compile_text(BASE + BRIDGE + nic, "p.yaml", Options(node_name="n"))
    files = _files(tree_of(state), NIC_PATH)
    assert set(files) == {"vendor", "irq", "resource", "reset_method", "config", "remove",
                          "rescan"}
    assert files["reset_method"] == (b"flr\n", 0o644, 0)
    assert files["remove"][1:] == (0o220, 13) and files["rescan"][1:] == (0o200, 13)


def test_a_kept_functions_override_and_binding_are_the_states() -> None:
    """Its ``driver_override`` starts as captured and follows writes; once a write rebinds
    it, its ``uevent`` names the driver bound, as a made function's does."""
    uevent = "DRIVER=virtio-pci\\nPCI_CLASS=20000\\n"
    nic = NIC.replace('irq: "11\\n"', f'irq: "11\\n", uevent: "{uevent}",'
                      ' driver_override: "virtio-pci\\n"') + "    driver: virtio-pci\n"
    state = compile_text(BASE + BRIDGE + nic, "p.yaml", Options(node_name="n"))
    fn = state.function("0000:01:00.0")
    assert fn.driver_override == "virtio-pci"
    files = _files(tree_of(state), NIC_PATH)
    assert files["driver_override"] == (b"virtio-pci\n", 0o644, 0)
    assert files["uevent"][0] == b"DRIVER=virtio-pci\nPCI_CLASS=20000\n"  # as captured
    # what mokkafs.writes.drivers makes of driver_override and bind writes
    bound = replace(fn, driver="vfio-pci", driver_override="vfio-pci",
                    native_driver="virtio-pci")
    files = _files(tree_of(replace(state, functions=(state.functions[0], bound))), NIC_PATH)
    assert files["driver_override"][0] == b"vfio-pci\n"
    assert files["uevent"][0] == pci.uevent(bound).encode()
    assert files["irq"][0] == b"11\n" and files["vendor"][0] == b"0x1af4\n"


def test_a_capture_of_a_made_function_lays_the_same_bytes_over_it() -> None:
    """Every fact of a function is made once: a function whose captured bytes are the made
    ones serves the made function's nodes, modes and all."""
    state = state_of("h100")
    for fn in state.functions:
        made = tuple(pci.made(fn, state))
        files = {n.name: n.content for n in made if isinstance(n, File)
                 and n.directory == fn.path and not n.error}
        config = files.pop("config")
        files.pop("vpd", None)
        assert isinstance(config, bytes)
        kept = replace(fn, raw=tuple(sorted(files.items())), config=config)  # type: ignore[arg-type]
        assert sorted(map(repr, pci.function(kept, state))) == sorted(map(repr, made)), fn.bdf
