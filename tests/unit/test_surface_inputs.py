"""Incremental compiles and builds are right: a compile that reuses the last PCI side equals
one that does not; every surface reads only the State fields its record names (``inputs``, so
reusing its last output when those are equal is sound), and so does each PCI function's
directory (``pci.FUNCTION_INPUTS``, the key its nodes are kept by); and a tree patched or partly
reused equals the tree built whole from the same State."""

from __future__ import annotations

import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mokkafs.errors import ProfileError
from mokkafs.faults.effects import applied, at
from mokkafs.profile.compile import Options, PciCache
from mokkafs.profile.resolve import compile_text, read_text
from mokkafs.state import Generation, HostFacts, State
from mokkafs.surfaces import SURFACES, infiniband, pci
from mokkafs.tree.assemble import Assembler
from mokkafs.tree.build import Tree
from mokkafs.tree.nodes import File
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import (
    ALL_PROFILES,
    H100_GPU0,
    HOST_PROC_DEVICES,
    profile_id,
    state_of,
)
from tests.helpers.write_book import written


class Recorder:
    """A State that notes which fields are read, through its methods too."""

    def __init__(self, state: State) -> None:
        self._state = state
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        value = getattr(type(self._state), name, None)
        if callable(value):  # a method: run it with this recorder as self
            return types.MethodType(value, self)
        self.read.add(name)
        return getattr(self._state, name)


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_each_surface_reads_only_its_inputs(path: Path) -> None:
    state = state_of(path, host=HostFacts(sysfs=True, proc_modules="fuse 1 0 - Live 0x0\n"))
    for surface in SURFACES:
        recorder = Recorder(state)
        list(surface.nodes(recorder, surface.cache()))  # type: ignore[arg-type]
        assert recorder.read <= set(surface.inputs), (surface.name,
                                                      recorder.read - set(surface.inputs))


# h100 with a GPU whose captured attributes a capture kept (``overrides``), and a bridge and a
# function kept verbatim on a root of their own
CAPTURED = (SHIPPED_PROFILES / "h100.yaml").read_text() + f"""pci_functions:
  - {{bdf: "{H100_GPU0}", root: pci0000:15, parent: "0000:17:01.0", overrides: true,
     attributes: {{irq: "211\\n", uevent: "DRIVER=nvidia\\n"}}, config: "de10", config_size: 64}}
  - {{bdf: "0000:f0:01.0", root: pci0000:f0, driver: pcieport, config: "8680", config_size: 256,
     attributes: {{vendor: "0x8086\\n", secondary_bus_number: "241\\n",
                  subordinate_bus_number: "241\\n"}}}}
  - {{bdf: "0000:f1:00.0", root: pci0000:f0, parent: "0000:f0:01.0",
     attributes: {{vendor: "0x1af4\\n", irq: "11\\n"}}}}
"""


def function_reads(state: State) -> set[tuple[bool, bool]]:
    """Check that each function's nodes read no State field beyond ``pci.FUNCTION_INPUTS``:
    the PCI surface keeps them while the function and those are the same, so a field read
    beyond them would leave them stale. Returns the forms met: (kept, captured bytes)."""
    forms = set()
    for fn in state.functions:
        recorder = Recorder(state)
        assert list(pci.function(fn, recorder))  # type: ignore[arg-type]
        assert recorder.read <= set(pci.FUNCTION_INPUTS), (fn.bdf, recorder.read)
        forms.add((fn.kind == "other", fn.raw is not None))
    return forms


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_each_functions_nodes_read_only_the_function_inputs(path: Path) -> None:
    assert function_reads(state_of(path)) == {(False, False)}


def test_each_captured_functions_nodes_read_only_the_function_inputs(tmp_path: Path) -> None:
    path = tmp_path / "captured.yaml"
    path.write_text(CAPTURED)
    assert function_reads(state_of(path)) == {(False, False), (False, True), (True, True)}


def same(a: Tree, b: Tree) -> bool:
    return {i: (e.parent, e.name, e.node, e.children, e.mtime_ns) for i, e in a.entries.items()} \
        == {i: (e.parent, e.name, e.node, e.children, e.mtime_ns) for i, e in b.entries.items()}


H100 = (SHIPPED_PROFILES / "h100.yaml").read_text()


@pytest.mark.parametrize("change", [
    H100.replace("28.39.2048", "28.40.1000"),  # content only: patched
    H100.replace('driver_version: "550.163.01"', 'driver_version: "580.95.05"'),
    H100.replace("product_name: DGXH100", "product_name: DGXH200"),
    H100.replace("rate_gbps: 400", "rate_gbps: 200"),
    H100 + "faults:\n  - {name: d, kind: ib-port-down, target: mlx5_3/1}\n",  # one port
    H100 + "faults:\n  - {name: e, kind: ib-errors, target: mlx5_4/1,\n"
           "      rates: {symbol_error: 5}}\n",  # one port's counters
    H100.replace("infiniband:\n", "infiniband:\n  gid_table_len: 4\n", 1),  # paths go
    H100 + "faults:\n  - {name: r, kind: hca-removed, target: mlx5_3}\n",  # paths go: whole
    H100.replace("0000:a8:00.0", "0000:a9:00.0"),  # an NVSwitch moves: whole
])
def test_an_incremental_build_equals_a_whole_one(tmp_path: Path, change: str) -> None:
    before = state_of("h100")
    assembler = Assembler(SURFACES)
    first, _ = assembler.build(before)
    path = tmp_path / "after.yaml"
    path.write_text(change)
    after = replace(at(applied(state_of(path), 0.0), 1.0), generation=Generation(2),
                    loaded_at=before.loaded_at + 5)
    incremental, _ = assembler.build(after, first)
    whole, _ = Assembler(SURFACES).build(after, None)
    # the whole build, told what the last tree was, gives the same entries and mtimes
    bare = Tree(first.generation, first.entries, first.dynamic_parents)  # (no parts to reuse)
    assert same(incremental, Assembler(SURFACES).build(after, bare)[0])
    assert {i: e.node for i, e in incremental.entries.items()} == {
        i: e.node for i, e in whole.entries.items()}
    assert incremental.dynamic_parents == whole.dynamic_parents


def test_a_swap_that_leaves_ports_alone_reuses_their_nodes(tmp_path: Path) -> None:
    """The InfiniBand surface keeps its last run's port subtrees: a firmware change makes
    the HCAs' nodes again and takes every port's as they were; a fault on one port makes
    that port's again, equal to what a first run makes of it."""
    before = state_of("h100")
    port = "/mlx5_3/ports/1"
    cache = infiniband.PortCache()
    first = {n.path: n for n in infiniband.nodes(before, cache)}
    path = tmp_path / "after.yaml"
    path.write_text(H100.replace("28.39.2048", "28.40.1000"))
    firmware = {n.path: n for n in infiniband.nodes(state_of(path), cache)}
    path.write_text(H100 + "faults:\n  - {name: d, kind: ib-port-down, target: mlx5_3/1}\n")
    down = at(applied(state_of(path), 0.0), 1.0)
    faulted = {n.path: n for n in infiniband.nodes(down, cache)}
    assert firmware.keys() == first.keys() == faulted.keys()
    ports = [p for p in first if "/ports/" in p]
    assert len(ports) > 800
    assert all(firmware[p] is first[p] for p in ports)
    assert not any(firmware[p] is first[p] for p in first if p.endswith("/fw_ver"))
    assert all((faulted[p] is firmware[p]) == (not p.endswith(port) and port + "/" not in p)
               for p in ports)
    state_path = next(p for p in ports if p.endswith(port + "/state"))
    node = faulted[state_path]
    assert isinstance(node, File) and node.read(1.0) == b"1: DOWN\n"
    # a first run of the same State
    assert {n.path: n for n in infiniband.nodes(down, infiniband.PortCache())} == faulted


def test_a_write_reuses_the_nodes_of_the_functions_it_leaves_alone() -> None:
    """The PCI surface keeps its last run's nodes of each function: 4 VFs made over one PF
    make that PF's nodes and the VFs' again and take every other function's as they were;
    the tree built from them equals one built whole."""
    before = state_of("h100")
    cache = pci.FunctionCache()
    first = {n.path: n for n in pci.nodes(before, cache)}
    _, after = written(before, ("0000:18:00.0", "sriov_numvfs", "4"))
    second = {n.path: n for n in pci.nodes(after, cache)}
    pf = before.function("0000:18:00.0").path
    vfs = [fn.path for fn in after.functions if fn.physfn == "0000:18:00.0"]
    assert len(vfs) == 4 and all(v not in first for v in vfs)
    dirs = {fn.path for fn in before.functions}

    def owner(path: str) -> str | None:  # the function whose directory holds ``path``
        while path and path not in dirs:
            path = path.rpartition("/")[0]
        return path or None

    kept = [n for n in first if owner(n) not in (None, pf)]
    assert len(kept) > 30 * (len(dirs) - 1) and all(second[n] is first[n] for n in kept)
    assert second[f"{pf}/config"] is not first[f"{pf}/config"]  # its NumVFs changed
    assert second[f"{pf}/config"] != first[f"{pf}/config"]
    assert second == {n.path: n for n in pci.nodes(after, pci.FunctionCache())}
    assembler = Assembler(SURFACES)
    tree, _ = assembler.build(before)
    incremental, _ = assembler.build(after, tree)
    whole, _ = Assembler(SURFACES).build(after, None)
    assert {i: e.node for i, e in incremental.entries.items()} == {
        i: e.node for i, e in whole.entries.items()}


def compiled(path: Path, cache: PciCache) -> State:
    """``state_of(path)``, reusing what ``cache`` keeps of the compile before."""
    options = Options(node_name="node-a", started_at=0.0, loaded_at=1_700_000_000.0,
                      host=HostFacts(HOST_PROC_DEVICES))
    return compile_text(read_text(path), str(path), options, cache)


IB_ERRORS = "infiniband:\n  traffic: {errors_per_sec: {symbol_error: 1}}\n"


@pytest.mark.parametrize(("change", "reused"), [
    (H100.replace("28.39.2048", "28.40.1000"), True),  # HCA-only settings
    (H100.replace("rate_gbps: 400", "rate_gbps: 200"), True),
    (H100.replace("infiniband:\n", IB_ERRORS, 1), True),
    (H100 + "faults:\n  - {name: d, kind: ib-port-down, target: mlx5_3/1}\n", True),
    (H100.replace("hca_type: MT4129", "hca_type: MT4123"), False),  # the HCAs' device id
    (H100.replace("{bus_id: \"0000:aa:00.1\", name: mlx5_8}",
                  "{bus_id: \"0000:aa:00.1\", name: mlx5_12}"), False),  # an HCA's name
    (H100.replace("product_name: DGXH100", "product_name: DGXH200"), False),
    (H100.replace("0000:a8:00.0", "0000:a9:00.0"), False),  # an NVSwitch moves
    # a GPU's own (default) PCIe link instead of device_defaults' Gen 5: equal models, but
    # a key set in the document
    (H100.replace("{index: 0, uuid", "{index: 0, pcie: {}, uuid"), False),
])
def test_a_compile_reusing_the_pci_side_equals_a_fresh_one(tmp_path: Path, change: str,
                                                          reused: bool) -> None:
    cache = PciCache()
    before = compiled(SHIPPED_PROFILES / "h100.yaml", cache)
    path = tmp_path / "after.yaml"
    path.write_text(change)
    after = compiled(path, cache)
    assert (after.functions is before.functions) is reused
    assert compiled(path, PciCache()) == after == state_of(path)


def test_a_reused_pci_side_still_checks_the_infiniband_section(tmp_path: Path) -> None:
    """The checks of HCA-only settings run on every compile, not only with the PCI side."""
    cache = PciCache()
    compiled(SHIPPED_PROFILES / "h100.yaml", cache)
    last = cache.last
    path = tmp_path / "after.yaml"
    path.write_text(H100.replace("infiniband:\n", IB_ERRORS.replace("symbol_error",
                                                                      "no_such_counter"), 1))
    with pytest.raises(ProfileError, match=r"errors_per_sec\.no_such_counter: not an error"):
        compiled(path, cache)
    assert last is not None and cache.last is last  # reused, and checked
