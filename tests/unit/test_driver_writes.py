"""Driver binding as a write layer, without a mount: ``unbind``, ``bind``, ``driver_override``
and ``drivers_probe`` as the kernel's driver core takes them (drivers/base/bus.c,
drivers/base/driver.c, drivers/pci/pci-driver.c), and what an unbound GPU loses."""

from __future__ import annotations

import errno

import pytest

from mokkafs.layers.kept import KeptWrite
from mokkafs.layers.registry import Layers
from mokkafs.model.sysfs import StoreKey
from mokkafs.serve.record import record, restore
from mokkafs.state import State
from mokkafs.surfaces.dev import char_devices
from tests.helpers.live import profile_text
from tests.helpers.profiles import (
    H100_GPU0,
    H100_NIC0,
    device_path,
    read_following_links,
    state_of,
    tree_of,
)
from tests.helpers.write_book import refused, store_of, take, written

GPU = H100_GPU0


@pytest.fixture(scope="module")
def h100() -> State:
    return state_of("h100")




def test_the_bus_files_and_the_override_are_stores(h100: State) -> None:
    tree = tree_of(h100)
    for name in ("bind", "unbind"):
        assert store_of(tree, f"sys/bus/pci/drivers/nvidia/{name}") == StoreKey("nvidia", name)
    assert store_of(tree, "sys/bus/pci/drivers_probe") == StoreKey("pci", "drivers_probe")
    assert store_of(tree, f"{device_path(GPU)}/driver_override") == \
        StoreKey(GPU, "driver_override")
    for path in ("sys/bus/pci/drivers/nvidia/uevent", "sys/bus/pci/uevent",
                 f"{device_path(GPU)}/numa_node", f"{device_path(GPU)}/reset"):
        assert store_of(tree, path) is None, path


def test_an_unbound_gpu_loses_its_link_its_proc_entry_and_its_node(h100: State) -> None:
    minor = h100.function(GPU).gpu.minor  # type: ignore[union-attr]
    book, served = written(h100, ("nvidia", "unbind", f"{GPU}\n"))
    assert served.function(GPU).driver == ""
    assert book.listing() == [{"target": GPU, "attribute": "driver", "value": "", "at": 0.0}]
    tree = tree_of(served)
    assert tree.resolve(f"sys/bus/pci/drivers/nvidia/{GPU}") is None
    assert tree.resolve(f"{device_path(GPU)}/driver") is None
    assert tree.resolve(f"proc/driver/nvidia/gpus/{GPU}") is None
    assert tree.resolve(f"dev/nvidia{minor}") is None
    assert f"/dev/nvidia{minor}" not in [p for p, *_ in char_devices(served)]
    assert tree.resolve("sys/bus/pci/drivers/nvidia") is not None  # still registered
    _, again = written(h100, ("nvidia", "unbind", GPU), ("nvidia", "bind", GPU))
    tree = tree_of(again)
    assert tree.resolve(f"proc/driver/nvidia/gpus/{GPU}") is not None
    assert tree.resolve(f"dev/nvidia{minor}") is not None
    assert tree.resolve(f"sys/bus/pci/drivers/nvidia/{GPU}") is not None


def test_the_kernels_errnos(h100: State) -> None:
    assert refused(h100, ("nvidia", "unbind", "0000:ff:00.0")) == errno.ENODEV
    assert refused(h100, ("nvidia", "unbind", "garbage")) == errno.ENODEV
    assert refused(h100, ("mlx5_core", "unbind", GPU)) == errno.ENODEV  # not its driver
    assert refused(h100, ("nvidia", "bind", GPU)) == errno.EBUSY  # bound already
    assert refused(h100, ("nvidia", "unbind", GPU), ("mlx5_core", "bind", GPU)) \
        == errno.ENODEV  # its ID table does not match a GPU
    assert refused(h100, ("nvidia", "unbind", GPU), ("vfio-pci", "bind", GPU)) \
        == errno.ENODEV  # not loaded on h100
    assert refused(h100, (GPU, "driver_override", "x" * 4095)) == errno.EINVAL
    assert refused(h100, (GPU, "driver", "nvidia")) == errno.EACCES  # a link


def test_the_override_decides_which_driver_may_take_it(h100: State) -> None:
    _, served = written(h100, (GPU, "driver_override", "mlx5_core\n"))
    assert served.function(GPU).driver_override == "mlx5_core"
    assert read_following_links(tree_of(served), f"{device_path(GPU)}/driver_override") \
        == b"mlx5_core\n"
    assert served.function(GPU).driver == "nvidia"  # an override binds nothing by itself
    assert refused(h100, (GPU, "driver_override", "mlx5_core\n"), ("nvidia", "unbind", GPU),
                   ("nvidia", "bind", GPU)) == errno.ENODEV
    _, served = written(h100, (GPU, "driver_override", "mlx5_core\n"),
                        ("nvidia", "unbind", GPU), ("pci", "drivers_probe", f"{GPU}\n"))
    assert served.function(GPU).driver == "mlx5_core"
    # cleared by a newline, or by nothing: the ID table decides again
    for clear in ("\n", "", "\0junk"):
        _, served = written(h100, (GPU, "driver_override", "mlx5_core"),
                            (GPU, "driver_override", clear), ("nvidia", "unbind", GPU),
                            ("pci", "drivers_probe", GPU))
        assert served.function(GPU).driver_override is None
        assert served.function(GPU).driver == "nvidia"
    assert read_following_links(tree_of(served), f"{device_path(GPU)}/driver_override") \
        == b"(null)\n"


def test_drivers_probe(h100: State) -> None:
    assert refused(h100, ("pci", "drivers_probe", "0000:ff:00.0\n")) == errno.ENODEV
    book, _ = written(h100, ("pci", "drivers_probe", GPU))  # bound: left as it is
    assert book.listing() == []
    # an override naming a driver not loaded: nothing binds, and the write succeeds
    _, served = written(h100, (GPU, "driver_override", "vfio-pci"), ("nvidia", "unbind", GPU),
                        ("pci", "drivers_probe", GPU))
    assert served.function(GPU).driver == ""


def test_unbinding_a_pf_disables_its_vfs_and_its_vfs_may_be_unbound(h100: State) -> None:
    # mlx5_core's remove_one disables SR-IOV (mlx5_sriov_disable): the VFs go with their writes
    book, served = written(h100, (H100_NIC0, "sriov_numvfs", "2"),
                           ("mlx5_core", "unbind", "0000:18:00.1"),
                           ("mlx5_core", "unbind", H100_NIC0))
    pf = served.function(H100_NIC0)
    assert pf.driver == "" and pf.sriov is not None and pf.sriov.numvfs == 0
    assert not any(fn.physfn == H100_NIC0 for fn in served.functions)
    assert [(w["target"], w["attribute"]) for w in book.listing()] == [(H100_NIC0, "driver")]
    assert refused(h100, ("mlx5_core", "unbind", H100_NIC0),
                   (H100_NIC0, "sriov_numvfs", "2")) == errno.ENOENT
    _, served = written(h100, (H100_NIC0, "sriov_numvfs", "2"),
                        ("mlx5_core", "unbind", "0000:18:00.1"))
    assert served.function("0000:18:00.1").driver == ""
    assert served.function("0000:18:00.2").driver == "mlx5_core"


def test_the_writes_of_vfs_end_with_them(h100: State) -> None:
    book, _ = written(h100, (H100_NIC0, "sriov_numvfs", "2"),
                      ("mlx5_core", "unbind", "0000:18:00.1"))
    take(book, H100_NIC0, "sriov_numvfs", "0", book.merge(h100))
    served = book.merge(h100)
    assert [w["attribute"] for w in book.listing()] == ["sriov_numvfs"]
    assert book.dropped == 0 and "0000:18:00.1" not in {fn.bdf for fn in served.functions}


def test_the_state_file_keeps_bindings() -> None:
    KeptWrite(bdf=GPU, attribute="driver", value="", at=0.0)
    KeptWrite(bdf=GPU, attribute="driver_override", value="vfio-pci", at=0.0)
    with pytest.raises(ValueError):
        KeptWrite(bdf=GPU, attribute="sriov_numvfs", value="vfio-pci", at=0.0)


VFIO_TEXT = '  driver_version: "550.163.01"\n'


@pytest.fixture(scope="module")
def vfio_state(tmp_path_factory: pytest.TempPathFactory) -> State:
    """h100 on a passthrough node: vfio-pci loaded."""
    path = tmp_path_factory.mktemp("vfio") / "h100-vfio.yaml"
    text = profile_text("h100")
    assert text.count(VFIO_TEXT) == 1
    path.write_text(text.replace(VFIO_TEXT, VFIO_TEXT + "  vfio_pci: true\n"))
    return state_of(path)


def test_vfio_pci_is_loaded_only_where_the_profile_says(h100: State, vfio_state: State,
                                                        ) -> None:
    assert "vfio-pci" not in h100.pci_drivers
    assert tree_of(h100).resolve("sys/module/vfio_pci") is None
    state = vfio_state
    tree = tree_of(state)
    assert tree.resolve("sys/bus/pci/drivers/vfio-pci/bind") is not None
    assert tree.resolve("sys/module/vfio_pci/drivers/pci:vfio-pci") is not None
    assert b"vfio_pci 16384 0 - Live" in read_following_links(tree, "proc/modules")
    assert [p for p, *_ in char_devices(state) if "vfio" in p] == ["/dev/vfio/vfio"]


def test_a_gpu_rebound_to_vfio_pci(vfio_state: State) -> None:
    state = vfio_state
    group = state.function(GPU).iommu_group
    assert refused(state, ("nvidia", "unbind", GPU), ("vfio-pci", "bind", GPU)) \
        == errno.ENODEV  # no override, no ID: vfio-pci matches nothing
    for how in ([(GPU, "driver_override", "vfio-pci\n"), ("nvidia", "unbind", GPU),
                 ("pci", "drivers_probe", GPU)],
                [("nvidia", "unbind", GPU), ("vfio-pci", "new_id", "10de 2330\n")]):
        _, served = written(state, *how)
        assert served.function(GPU).driver == "vfio-pci"
        tree = tree_of(served)
        assert read_following_links(tree, f"{device_path(GPU)}/vfio-dev/vfio{group}/dev") \
            == f"507:{group}\n".encode()
        nodes = {p: (major, minor) for p, major, minor, _ in char_devices(served)}
        assert nodes[f"/dev/vfio/{group}"] == (508, group)
        assert nodes["/dev/vfio/vfio"] == (10, 196)
        assert tree.resolve(f"dev/vfio/{group}") is not None
        assert tree.resolve(f"proc/driver/nvidia/gpus/{GPU}") is None
        devices = read_following_links(tree, "proc/devices").decode()
        for major, name in ((10, "misc"), (507, "vfio-dev"), (508, "vfio")):
            assert f"{major:3d} {name}\n" in devices
    assert refused(state, ("vfio-pci", "new_id", "10de\n")) == errno.EINVAL
    assert refused(state, ("vfio-pci", "new_id", "zz 2330\n")) == errno.EINVAL
    book, _ = written(state, ("vfio-pci", "new_id", "10de 2330"))  # every GPU is bound
    assert [(w["target"], w["attribute"]) for w in book.listing()] == [("vfio-pci", "new_id")]


def test_bindings_and_removals_survive_a_restart(h100: State) -> None:
    book, served = written(h100, (GPU, "driver_override", "vfio-pci"), ("nvidia", "unbind", GPU),
                           (H100_NIC0, "remove", "1"))
    layers = Layers(book)
    again = restore(record(layers, served, "boot-1", 10.0, 1e9), "boot-1", 20.0, 1e9)
    assert again.layers.writes.listing() == book.listing()
    assert again.layers.over(h100) == served


def test_an_unbound_hca_loses_its_rdma_device_and_netdev(h100: State) -> None:
    hca = next(h for h in h100.hcas if h.bdf == H100_NIC0)
    tree = tree_of(h100)
    assert tree.resolve(f"sys/class/infiniband/{hca.name}") is not None
    assert tree.resolve(f"{device_path(H100_NIC0)}/net") is not None
    _, served = written(h100, ("mlx5_core", "unbind", H100_NIC0))
    tree = tree_of(served)
    assert tree.resolve(f"sys/class/infiniband/{hca.name}") is None
    assert tree.resolve(f"{device_path(H100_NIC0)}/net") is None
    _, again = written(h100, ("mlx5_core", "unbind", H100_NIC0),
                       ("mlx5_core", "bind", H100_NIC0))
    assert again.hcas == h100.hcas
