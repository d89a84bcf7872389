"""Hot-unplug and rescan as writes, without a mount (drivers/pci/pci-sysfs.c remove_store,
dev_rescan_store, rescan_store): a removed function leaves every surface with what is below
it, and a rescan brings it back with the same identity, probed afresh."""

from __future__ import annotations

import errno

import pytest

from mokkafs.model.sysfs import StoreKey
from mokkafs.state import State
from mokkafs.surfaces.dev import char_devices
from mokkafs.writes.attributes import WriteRefused
from tests.helpers.profiles import H100_GPU0, H100_NIC0, device_path, state_of, tree_of
from tests.helpers.write_book import store_of, written

GPU = H100_GPU0


@pytest.fixture(scope="module")
def h100() -> State:
    return state_of("h100")



def test_the_stores(h100: State) -> None:
    tree = tree_of(h100)
    for name in ("remove", "rescan"):
        assert store_of(tree, f"{device_path(GPU)}/{name}") == StoreKey(GPU, name)
    assert store_of(tree, "sys/bus/pci/rescan") == StoreKey("pci", "rescan")
    bridge = h100.function(h100.function(GPU).parent or "")
    assert bridge.bridge is not None
    bus = f"{GPU[:4]}:{bridge.bridge.secondary:02x}"
    assert store_of(tree, f"{bridge.path}/pci_bus/{bus}/rescan") == StoreKey(bus, "rescan")
    for path in (f"{device_path(GPU)}/reset", f"{bridge.path}/pci_bus/{bus}/uevent"):
        assert store_of(tree, path) is None, path


def test_a_removed_gpu_leaves_every_surface_and_comes_back(h100: State) -> None:
    fn = h100.function(GPU)
    minor = fn.gpu.minor  # type: ignore[union-attr]
    book, served = written(h100, ("nvidia", "unbind", GPU), (GPU, "driver_override", "x"),
                           (GPU, "remove", "1\n"))
    assert book.listing() == [{"target": GPU, "attribute": "remove", "value": "1", "at": 0.0}]
    assert GPU not in {f.bdf for f in served.functions}
    tree = tree_of(served)
    for path in (device_path(GPU), f"sys/bus/pci/devices/{GPU}",
                 f"proc/driver/nvidia/gpus/{GPU}", f"dev/nvidia{minor}"):
        assert tree.resolve(path) is None, path
    assert f"/dev/nvidia{minor}" not in [p for p, *_ in char_devices(served)]
    _, back = written(h100, ("nvidia", "unbind", GPU), (GPU, "remove", "1"),
                      ("pci", "rescan", "1"))
    assert back.function(GPU) == fn  # probed afresh: its writes ended with it


def test_a_bridge_takes_what_is_below_it_and_a_rescan_of_its_bus_brings_it_back(
        h100: State) -> None:
    parent = h100.function(GPU).parent
    assert parent is not None
    _, served = written(h100, (parent, "remove", "1"))
    assert {GPU, parent}.isdisjoint({f.bdf for f in served.functions})
    sibling = h100.function(parent)
    others = [f.bdf for f in served.functions if f.parent == sibling.parent]
    assert others, "a sibling on the removed bridge's bus"
    _, back = written(h100, (parent, "remove", "1"), (others[0], "rescan", "1"))
    assert back.functions == h100.functions


def test_a_pf_takes_its_vfs_and_its_rdma_device(h100: State) -> None:
    _, served = written(h100, (H100_NIC0, "sriov_numvfs", "2"), (H100_NIC0, "remove", "1"))
    bdfs = {f.bdf for f in served.functions}
    assert H100_NIC0 not in bdfs and "0000:18:00.1" not in bdfs
    assert H100_NIC0 not in {h.bdf for h in served.hcas}
    book, back = written(h100, (H100_NIC0, "sriov_numvfs", "2"), (H100_NIC0, "remove", "1"),
                         ("pci", "rescan", "1"))
    assert book.listing() == [] and back.functions == h100.functions


def test_the_kernels_parsing(h100: State) -> None:
    book, _ = written(h100, (GPU, "remove", "0"), ("pci", "rescan", "1"))
    assert book.listing() == [] and book.taken == 0
    with pytest.raises(WriteRefused) as info:
        written(h100, (GPU, "remove", "yes"))
    assert info.value.errno == errno.EINVAL


def test_a_bus_rescan_brings_back_what_is_on_it_and_below(h100: State) -> None:
    parent = h100.function(h100.function(GPU).parent or "")
    assert parent.bridge is not None
    own = f"{GPU[:4]}:{parent.bridge.secondary:02x}"
    _, back = written(h100, (GPU, "remove", "1"), (own, "rescan", "1"))
    assert back.functions == h100.functions
    bus = int(GPU[5:7], 16)
    other = next(f for f in h100.functions if f.bridge is not None and
                 not f.bridge.secondary <= bus <= f.bridge.subordinate)
    book, served = written(h100, (GPU, "remove", "1"),
                           (f"{GPU[:4]}:{other.bridge.secondary:02x}", "rescan", "1"))  # type: ignore[union-attr]
    assert GPU not in {f.bdf for f in served.functions} and len(book.listing()) == 1
