"""Overrides (``pci_functions`` entries with ``overrides: true``, what ``mokkafs capture``
writes for a real node's GPUs, HCAs and bridges): the made function serves the captured
attributes and config space and stays what its sections make it, and a wrong entry is
refused with the field and the fix."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mokkafs.errors import ProfileError
from mokkafs.faults.effects import applied, at
from mokkafs.profile.compile import Options
from mokkafs.profile.resolve import compile_text
from mokkafs.tree.nodes import File
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import H100_GPU0, tree_of

H100 = (SHIPPED_PROFILES / "h100.yaml").read_text()
OPTIONS = Options(node_name="node-a")


def _entry(bdf: str = H100_GPU0, root: str = "pci0000:15", parent: str = "0000:17:01.0",
           more: str = "") -> str:
    return (f'  - {{bdf: "{bdf}", root: {root}, parent: "{parent}", overrides: true,\n'
            '     attributes: {irq: "211\\n", vendor: "0x10de\\n", driver_override: "x\\n"},\n'
            f'     config: "de10", config_size: 64{more}}}\n')


def _content(tree: object, path: str) -> bytes:
    entry = tree.resolve(path)  # type: ignore[attr-defined]
    assert entry is not None and isinstance(entry.node, File), path
    return entry.node.read(0.0)


def test_an_override_serves_the_captured_attributes_of_a_gpu_that_stays_a_gpu() -> None:
    made = compile_text(H100, "h100.yaml", OPTIONS).function(H100_GPU0)
    assert made.parent == "0000:17:01.0" and made.root == "pci0000:15"  # as _entry names
    state = compile_text(H100 + "pci_functions:\n" + _entry(), "p.yaml", OPTIONS)
    gpu = state.function(H100_GPU0)
    assert gpu.kind == "gpu" and gpu.gpu is not None and gpu.irq == 211
    assert gpu.path == made.path and gpu.numa_node == made.numa_node
    tree = tree_of(state)
    assert _content(tree, f"{gpu.path}/irq") == b"211\n"
    assert _content(tree, f"{gpu.path}/config") == bytes.fromhex("de10") + bytes(62)
    assert gpu.driver_override == "x"  # the captured one, as the State keeps it
    assert _content(tree, f"{gpu.path}/driver_override") == b"x\n"
    assert tree.resolve(f"{gpu.path}/resource") is None  # not captured: not served
    info = _content(tree, f"proc/driver/nvidia/gpus/{H100_GPU0}/information").decode()
    assert "IRQ:   \t\t 211\n" in info
    others = [fn for fn in state.functions if fn.bdf != H100_GPU0]
    assert all(fn.raw is None for fn in others)


@pytest.mark.parametrize(("entries", "where", "fix"), [
    (_entry(bdf="0000:ee:00.0"), "pci_functions[0].overrides", "leave overrides out"),
    (_entry(root="pci0000:97"), "pci_functions[0].root", "give root: pci0000:15"),
    (_entry(parent="0000:19:00.0"), "pci_functions[0].parent", "parent: 0000:17:01.0"),
    (_entry() + _entry(), "pci_functions[1].bdf", "keep one entry per function"),
    (_entry().replace(" overrides: true,", ""), "pci_functions[0].bdf",
     "set overrides: true"),
])
def test_wrong_overrides_name_the_field_and_the_fix(entries: str, where: str,
                                                     fix: str) -> None:
    with pytest.raises(ProfileError) as err:
        compile_text(H100 + "pci_functions:\n" + entries, "p.yaml", OPTIONS)
    assert where in str(err.value) and fix in str(err.value), str(err.value)


def test_an_override_without_vpd_keeps_the_made_vpd() -> None:
    b200 = (SHIPPED_PROFILES / "b200.yaml").read_text()
    hca = "0000:e9:00.0"  # the B200's NVLink management NIC, with VPD (SW_MNG)
    made = compile_text(b200, "b200.yaml", OPTIONS).function(hca)
    assert made.vpd and made.kind == "hca"
    entry = _entry(bdf=hca, root=made.root, parent=str(made.parent))
    state = compile_text(b200 + "pci_functions:\n" + entry, "p.yaml", OPTIONS)
    assert state.function(hca).vpd == made.vpd and state.function(hca).irq == 211
    with_vpd = _entry(bdf=hca, root=made.root, parent=str(made.parent), more=', vpd: "82"')
    state = compile_text(b200 + "pci_functions:\n" + with_vpd, "p.yaml", OPTIONS)
    assert state.function(hca).vpd == b"\x82"


def test_an_overridden_gpu_rebound_by_a_write_serves_the_states_binding() -> None:
    uevent = 'uevent: "DRIVER=nvidia\\nPCI_SLOT_NAME=0000:1b:00.0\\n", driver_override:'
    text = H100 + "pci_functions:\n" + _entry().replace("driver_override:", uevent)
    state = compile_text(text, "p.yaml", OPTIONS)
    gpu = state.function(H100_GPU0)
    assert _content(tree_of(state), f"{gpu.path}/uevent").startswith(b"DRIVER=nvidia\nPCI_SLOT")
    # what mokkafs.writes.drivers makes of driver_override and bind writes
    bound = replace(gpu, driver="vfio-pci", driver_override="vfio-pci", native_driver="nvidia")
    state = replace(state, functions=tuple(bound if fn.bdf == gpu.bdf else fn
                                           for fn in state.functions))
    tree = tree_of(state)
    assert _content(tree, f"{gpu.path}/driver_override") == b"vfio-pci\n"
    assert _content(tree, f"{gpu.path}/uevent").startswith(b"DRIVER=vfio-pci\nPCI_CLASS=30200")
    assert _content(tree, f"{gpu.path}/irq") == b"211\n"  # still the captured one


def test_a_fault_on_an_overridden_gpu_changes_its_link_and_config_as_on_a_made_one() -> None:
    """A captured GPU's link attributes and Link Status come from the State: equal to the
    captured ones until a fault degrades the link, then the fault's, as for a made GPU."""
    made = compile_text(H100, "h100.yaml", OPTIONS)
    gpu = made.function(H100_GPU0)
    tree = tree_of(made)
    names = ("current_link_speed", "current_link_width", "max_link_width", "max_link_speed")
    captured = {n: _content(tree, f"{gpu.path}/{n}").decode() for n in names}
    config = _content(tree, f"{gpu.path}/config")
    attributes = ", ".join(f'{n}: "{v.strip()}\\n"' for n, v in captured.items())
    entry = (f'  - {{bdf: "{H100_GPU0}", root: pci0000:15, parent: "0000:17:01.0", '
             f'overrides: true,\n     attributes: {{{attributes}}},\n'
             f'     config: "{config.rstrip(bytes(1)).hex()}", config_size: {len(config)}}}\n')
    faults = "faults:\n  - {name: p, kind: pcie-degraded, target: gpu0, gen: 3, width: 8}\n"
    for text, speed, width in ((H100, captured["current_link_speed"], gpu.link.current_width),
                               (H100 + faults, "8.0 GT/s PCIe\n", 8)):
        state = applied(compile_text(text + "pci_functions:\n" + entry, "p.yaml", OPTIONS),
                        0.0)
        served = tree_of(at(state, 1.0))
        assert _content(served, f"{gpu.path}/current_link_speed").decode() == speed
        assert _content(served, f"{gpu.path}/current_link_width") == f"{width}\n".encode()
        status = _content(served, f"{gpu.path}/config")
        if text == H100:
            assert status == config  # nothing changed it: the captured bytes
        else:
            assert status != config and len(status) == len(config)
            pcie = next(off for off in range(0x40, 0x100, 4) if config[off] == 0x10
                        and config[off + 2] & 0x0F == 2)  # the PCI Express capability
            assert status[pcie + 0x12] & 0x0F == 3 and (status[pcie + 0x12] >> 4
                                                       | status[pcie + 0x13] << 4) & 0x3F == 8
