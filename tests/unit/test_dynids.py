"""Dynamic IDs as a write layer, without a mount (mokkafs.writes.dynids): ``new_id`` and
``remove_id`` as drivers/pci/pci-driver.c takes them, the IDs kept for the functions that
appear later (VFs, functions a rescan brings back) in driver order, across a restart and a
profile swap."""

from __future__ import annotations

import errno
import json
from dataclasses import replace
from pathlib import Path

import pytest

from mokkafs.layers.registry import Layers
from mokkafs.model.sysfs import StoreKey
from mokkafs.serve.durable import StateFile, write_atomically
from mokkafs.serve.record import record, restore
from mokkafs.state import State
from mokkafs.writes.attributes import WriteRefused
from mokkafs.writes.book import WriteBook
from mokkafs.writes.dynids import ANY, MAX_DYNIDS, DynId, parse
from tests.helpers.live import profile_text
from tests.helpers.profiles import H100_GPU0, H100_NIC0, state_of, tree_of
from tests.helpers.write_book import refused, store_of, take, written

GPU, PF = H100_GPU0, H100_NIC0
VFS = ("0000:18:00.1", "0000:18:00.2")
VFIO_TEXT = '  driver_version: "550.163.01"\n'


@pytest.fixture(scope="module")
def vfio(tmp_path_factory: pytest.TempPathFactory) -> State:
    path = tmp_path_factory.mktemp("vfio") / "h100-vfio.yaml"
    path.write_text(profile_text("h100").replace(VFIO_TEXT, VFIO_TEXT + "  vfio_pci: true\n"))
    return state_of(path)


@pytest.fixture(scope="module")
def vfio_first(vfio: State) -> State:
    """The same node had vfio-pci registered before the others (an initramfs that loads it
    first): it is probed first."""
    order = ("vfio-pci", *(d for d in vfio.pci_drivers if d != "vfio-pci"))
    return replace(vfio, pci_drivers=order)


def drivers(served: State, bdfs: tuple[str, ...]) -> list[str]:
    return [served.function(b).driver for b in bdfs]


def test_fields_are_read_as_sscanf_reads_them(vfio: State) -> None:
    for name in ("new_id", "remove_id"):
        assert store_of(tree_of(vfio), f"sys/bus/pci/drivers/vfio-pci/{name}") == \
            StoreKey("vfio-pci", name)
    assert parse("10de 2330\n", 7) == (DynId(0x10DE, 0x2330), 2)
    assert parse("0x15b3 0x101e zz 5", 7) == (DynId(0x15B3, 0x101E), 2)
    assert parse("15b3 101e 15b3 0 20000 ff0000 1", 7) == \
        (DynId(0x15B3, 0x101E, 0x15B3, 0, 0x20000, 0xFF0000, 1), 7)
    assert DynId(0x10DE, 0x2330).text() == "10de 2330 ffffffff ffffffff 0 0 0"
    assert parse(DynId(0x10DE, 0x2330).text(), 7)[0] == DynId(0x10DE, 0x2330, ANY, ANY)


def test_new_id_refuses_as_the_kernel_does(vfio: State) -> None:
    for text in ("10de\n", "zz 2330", ""):
        assert refused(vfio, ("vfio-pci", "new_id", text)) == errno.EINVAL
    assert refused(vfio, ("vfio-pci", "new_id", "10de 2330"),
                   ("vfio-pci", "new_id", "10de 2330")) == errno.EEXIST
    assert refused(vfio, ("vfio-pci", "new_id", "10de ffffffff"),
                   ("vfio-pci", "new_id", "10de 1234")) == errno.EEXIST  # ANY device
    # the static table: mlx5_core claims every Mellanox device already
    assert refused(vfio, ("mlx5_core", "new_id", "15b3 101e")) == errno.EEXIST
    assert refused(vfio, ("vfio-pci", "new_id", "10de 2330 ffffffff ffffffff 0 0 5")) \
        == errno.EINVAL  # a driver_data no entry of its table has
    # all seven fields: no EEXIST check, so the same ID twice is two entries
    book, _ = written(vfio, *[("vfio-pci", "new_id", "10de 2330 ffffffff ffffffff 0 0 0")] * 2)
    assert len(book.dynids["vfio-pci"]) == 2
    assert refused(vfio, ("vfio-pci", "new_id", "10de 2330"),
                   ("nvidia", "unbind", GPU), ("vfio-pci", "new_id", "10de 2330")) \
        == errno.EEXIST


def test_remove_id_takes_one_id_and_unbinds_nothing(vfio: State) -> None:
    assert refused(vfio, ("vfio-pci", "remove_id", "10de 2330")) == errno.ENODEV
    assert refused(vfio, ("vfio-pci", "remove_id", "10de")) == errno.EINVAL
    assert refused(vfio, ("vfio-pci", "new_id", "10de 2330"),
                   ("vfio-pci", "remove_id", "10de 2331")) == errno.ENODEV
    assert refused(vfio, ("vfio-pci", "new_id", "10de 2330 10de 1234"),
                   ("vfio-pci", "remove_id", "10de 2330 10de 9999")) == errno.ENODEV
    book, served = written(vfio, ("nvidia", "unbind", GPU), ("vfio-pci", "new_id", "10de 2330"),
                           ("vfio-pci", "new_id", "10de 2330 ffffffff ffffffff 0 0 0"),
                           ("vfio-pci", "remove_id", "10de 2330"))
    assert served.function(GPU).driver == "vfio-pci"  # bound by new_id, and stays bound
    assert len(book.dynids["vfio-pci"]) == 1
    # the class is compared under the mask written: the ID's class 0 is not 0x030000
    assert refused(vfio, ("vfio-pci", "new_id", "10de 2330"),
                   ("vfio-pci", "remove_id", "10de 2330 ffffffff ffffffff 30000 ff0000")) \
        == errno.ENODEV
    book, _ = written(vfio, ("vfio-pci", "new_id", "10de 2330"),
                      ("vfio-pci", "remove_id", "10de 2330 ffffffff ffffffff 30000 0"))
    assert book.dynids == {}


def test_vfs_made_later_are_probed_in_driver_order(vfio: State, vfio_first: State) -> None:
    # vfio-pci registers after mlx5_core, whose static table claims the VF: mlx5_core wins
    _, served = written(vfio, ("vfio-pci", "new_id", "15b3 101e"), (PF, "sriov_numvfs", "2"))
    assert drivers(served, VFS) == ["mlx5_core", "mlx5_core"]
    # vfio-pci first: its dynamic ID takes the VFs, and mlx5 makes no RDMA device for them
    _, served = written(vfio_first, ("vfio-pci", "new_id", "15b3 101e"),
                        (PF, "sriov_numvfs", "2"))
    assert drivers(served, VFS) == ["vfio-pci", "vfio-pci"]
    assert not {h.bdf for h in served.hcas} & set(VFS)
    # removed, the ID takes no VF made after; the VFs it took went with their PF's 0
    _, served = written(vfio_first, ("vfio-pci", "new_id", "15b3 101e"),
                        (PF, "sriov_numvfs", "2"), ("vfio-pci", "remove_id", "15b3 101e"),
                        (PF, "sriov_numvfs", "0"), (PF, "sriov_numvfs", "2"))
    assert drivers(served, VFS) == ["mlx5_core", "mlx5_core"]
    # autoprobe off: a VF is not probed at all (pci_device_can_probe)
    _, served = written(vfio_first, ("vfio-pci", "new_id", "15b3 101e"),
                        (PF, "sriov_drivers_autoprobe", "0"), (PF, "sriov_numvfs", "2"))
    assert drivers(served, VFS) == ["", ""]


def test_a_function_back_from_rescan_is_probed_against_the_ids(vfio: State,
                                                               vfio_first: State) -> None:
    steps = (("vfio-pci", "new_id", "10de 2330"), (GPU, "remove", "1"), ("pci", "rescan", "1"))
    assert written(vfio, *steps)[1].function(GPU).driver == "nvidia"
    _, served = written(vfio_first, *steps)
    assert served.function(GPU).driver == "vfio-pci"
    _, served = written(vfio_first, *steps[:1], ("vfio-pci", "remove_id", "10de 2330"),
                        *steps[1:])
    assert served.function(GPU).driver == "nvidia"


def test_dynids_survive_a_restart_and_end_with_a_reboot(vfio: State) -> None:
    book, served = written(vfio, ("vfio-pci", "new_id", "15b3 101e"),
                           ("vfio-pci", "new_id", "10de 2330 ffffffff ffffffff 30000 ff0000"))
    text = record(Layers(book), served, "boot-1", 10.0, 1e9)
    again = restore(text, "boot-1", 20.0, 1e9).layers.writes
    assert again.dynids == book.dynids and again.listing() == book.listing()
    rebooted = restore(text, "boot-2", 20.0, 1e9)
    assert rebooted.layers.writes.dynids == {}
    assert any("dynamic IDs" in line for line in rebooted.ended)


def test_a_swap_keeps_the_ids_of_loaded_drivers(vfio: State, expected_logs: list[str]) -> None:
    expected_logs.append("dynamic IDs of vfio-pci dropped: vfio-pci is not loaded")
    book, _ = written(vfio, ("vfio-pci", "new_id", "15b3 101e"),
                      ("nvidia", "new_id", "10de 1234"))
    book.merge(vfio)
    assert set(book.dynids) == {"vfio-pci", "nvidia"}
    book.merge(state_of("h100"))  # vfio-pci not loaded there
    assert set(book.dynids) == {"nvidia"} and book.dropped == 1
    assert book.clear() == 1 and book.dynids == {}


def test_a_driver_keeps_a_bounded_number_of_ids(vfio: State) -> None:
    book = WriteBook(dynids={"vfio-pci": tuple(DynId(0x1000, d) for d in range(MAX_DYNIDS))})
    served = book.merge(vfio)
    with pytest.raises(WriteRefused) as info:
        take(book, "vfio-pci", "new_id", "10de 9999", served)
    assert info.value.errno == errno.ENOSPC and "remove_id one first" in info.value.reason
    take(book, "vfio-pci", "remove_id", "1000 0", served)
    take(book, "vfio-pci", "new_id", "10de 9999", book.merge(vfio))
    assert len(book.dynids["vfio-pci"]) == MAX_DYNIDS


def test_a_state_file_with_more_ids_than_a_driver_keeps_is_refused(
        vfio: State, tmp_path: Path, expected_logs: list[str]) -> None:
    expected_logs.append("state file .* refused")
    book = WriteBook(dynids={"vfio-pci": tuple(DynId(0x1000, d) for d in range(MAX_DYNIDS)),
                             "nvidia": (DynId(0x10DE, 1),)})
    text = record(Layers(book), book.merge(vfio), "boot-1", 10.0, 1e9)
    assert len(restore(text, "boot-1", 20.0, 1e9).layers.writes.dynids["vfio-pci"]) \
        == MAX_DYNIDS
    data = json.loads(text)
    data["dynids"] += [{"driver": "vfio-pci", "id": f"1000 {d:x} ffffffff ffffffff 0 0 0",
                        "at": 0.0} for d in range(MAX_DYNIDS, 50_000)]
    kept = StateFile(tmp_path / "s.json", "boot-1")
    write_atomically(kept.path, json.dumps(data))
    restored, why = kept.load(20.0)
    assert restored is None and why is not None
    assert f"state file {kept.path} refused" in why
    assert f"dynids: Value error, entry {MAX_DYNIDS + 1} is one driver's dynamic ID number " \
        f"{MAX_DYNIDS + 1}, and a driver keeps {MAX_DYNIDS} at most" in why
    assert "remove the file, or the entries past the bound" in why
