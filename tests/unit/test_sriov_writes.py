"""SR-IOV as a write layer, without a mount: the PFs the shipped profiles have, what a write
to ``sriov_numvfs`` makes of the State and the tree, and the kernel's rules for the writes
(drivers/pci/iov.c, sriov_numvfs_store)."""

from __future__ import annotations

import errno
import logging
import struct
from pathlib import Path

import pytest

from mokkafs.model.sriov import TOTAL_VFS, VF_DEVICE, vf_bdf
from mokkafs.surfaces.net import names
from mokkafs.writes.attributes import WriteRefused, kstrtobool, kstrtoul
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import H100_NIC0, read_following_links, state_of, tree_of
from tests.helpers.write_book import refused, written

PF = H100_NIC0  # mlx5_0, ibp24s0




@pytest.mark.parametrize("profile", ["h100", "h200", "b200", "gb200", "gb300"])
def test_the_connectx_functions_of_every_hgx_dgx_profile_are_pfs(profile: str) -> None:
    state = state_of(profile)
    hcas = {h.bdf for h in state.hcas}
    pfs = [fn for fn in state.functions if fn.sriov is not None]
    assert pfs and {fn.bdf for fn in pfs} <= hcas
    for fn in pfs:
        assert fn.sriov is not None and fn.sriov.total == TOTAL_VFS and fn.sriov.numvfs == 0
        vfs = {vf_bdf(fn, i) for i in range(fn.sriov.total)}
        assert not vfs & {f.bdf for f in state.functions}  # room for every VF


def test_a_pfs_attributes_and_config_space_agree() -> None:
    tree = tree_of(state_of("h100"))
    d = state_of("h100").function(PF).path

    def attr(name: str) -> str:
        return read_following_links(tree, f"{d}/{name}").decode().strip()

    assert [attr(n) for n in ("sriov_totalvfs", "sriov_numvfs", "sriov_offset", "sriov_stride",
                              "sriov_vf_device", "sriov_drivers_autoprobe")] == \
        ["8", "0", "1", "1", "101e", "1"]
    entry = tree.resolve(f"{d}/sriov_numvfs")
    assert entry is not None and entry.mode & 0o777 == 0o664
    config = read_following_links(tree, f"{d}/config")
    header, = struct.unpack_from("<I", config, 0x100)
    assert header & 0xFFFF == 0x0010 and header >> 20 == 0  # SR-IOV, the last capability
    initial, total, num = struct.unpack_from("<HHH", config, 0x10C)
    offset, stride = struct.unpack_from("<HH", config, 0x114)
    device, = struct.unpack_from("<H", config, 0x11A)
    assert (initial, total, num, offset, stride, device) == (8, 8, 0, 1, 1, VF_DEVICE)


def test_four_vfs_are_functions_beside_their_pf() -> None:
    state = state_of("h100")
    _, served = written(state, (PF, "sriov_numvfs", "4\n"))
    pf = served.function(PF)
    assert pf.sriov is not None and pf.sriov.numvfs == 4
    vfs = [fn for fn in served.functions if fn.physfn == PF]
    assert [v.bdf for v in vfs] == ["0000:18:00.1", "0000:18:00.2", "0000:18:00.3",
                                    "0000:18:00.4"]
    groups = [fn.iommu_group for fn in served.functions if fn.iommu_group is not None]
    assert len(groups) == len(set(groups))
    for v in vfs:
        assert v.device == VF_DEVICE and v.driver == pf.driver == "mlx5_core"
        assert (v.numa_node, v.cpus, v.parent, v.root) == (pf.numa_node, pf.cpus, pf.parent,
                                                           pf.root)
        assert v.path.rpartition("/")[0] == pf.path.rpartition("/")[0]
    tree = tree_of(served)
    for i, v in enumerate(vfs):
        assert tree.resolve(f"{pf.path}/virtfn{i}") is not None
        assert read_following_links(tree, f"{pf.path}/virtfn{i}/device") == b"0x101e\n"
        assert read_following_links(tree, f"sys/bus/pci/devices/{v.bdf}/physfn/sriov_numvfs") \
            == b"4\n"
        assert read_following_links(tree, f"sys/bus/pci/devices/{v.bdf}/numa_node") == b"0\n"
        assert tree.resolve(f"sys/bus/pci/drivers/mlx5_core/{v.bdf}") is not None
        assert tree.resolve(f"sys/kernel/iommu_groups/{v.iommu_group}/devices/{v.bdf}")
    config = read_following_links(tree, f"{pf.path}/config")
    assert struct.unpack_from("<H", config, 0x110)[0] == 4
    assert struct.unpack_from("<H", config, 0x108)[0] & 1  # VF Enable


def test_ib_vfs_get_rdma_devices_and_netdevs_with_guids_of_their_own() -> None:
    state = state_of("h100")
    _, served = written(state, (PF, "sriov_numvfs", "4"))
    vf_hcas = [h for h in served.hcas if served.function(h.bdf).physfn == PF]
    assert [h.name for h in vf_hcas] == ["mlx5_12", "mlx5_13", "mlx5_14", "mlx5_15"]
    guids = [p.guid for h in served.hcas for p in h.ports]
    assert len(guids) == len(set(guids))
    again = written(state_of("h100"), (PF, "sriov_numvfs", "4"))[1]
    assert [h.node_guid for h in again.hcas] == [h.node_guid for h in served.hcas]  # stable
    other = written(state_of("h100", node_name="node-b"), (PF, "sriov_numvfs", "4"))[1]
    assert not {h.node_guid for h in vf_hcas} & {h.node_guid for h in other.hcas}
    named = names(served)
    assert named[PF] == "ibp24s0" and named["0000:29:00.1"] == "ibp41s0f1"
    assert [named[h.bdf] for h in vf_hcas] == [f"ibp24s0v{i}" for i in range(4)]
    tree = tree_of(served)
    assert read_following_links(tree, "sys/class/net/ibp24s0v2/device/physfn/vendor") == \
        b"0x15b3\n"
    assert read_following_links(tree, "sys/class/net/ibp24s0/type") == b"32\n"
    assert read_following_links(tree, "sys/class/net/ibp24s0/operstate") == b"up\n"
    assert read_following_links(tree, "sys/class/net/ibp24s0/speed") == b"400000\n"
    assert tree.resolve("sys/class/infiniband/mlx5_13") is not None


def test_the_kernels_rules_for_sriov_numvfs() -> None:
    state = state_of("h100")
    assert refused(state, (PF, "sriov_numvfs", "4"), (PF, "sriov_numvfs", "2")) == errno.EBUSY
    assert refused(state, (PF, "sriov_numvfs", "9")) == errno.ERANGE
    assert refused(state, (PF, "sriov_numvfs", "70000")) == errno.ERANGE
    for bad in ("four", "", "4 4", "-1", "4\n\n", "0x"):
        assert refused(state, (PF, "sriov_numvfs", bad)) == errno.EINVAL, bad
    book, served = written(state, (PF, "sriov_numvfs", "0x4"), (PF, "sriov_numvfs", "4"))
    assert book.taken == 1  # the same number again changes nothing
    _, served = written(state, (PF, "sriov_numvfs", "4"), (PF, "sriov_numvfs", "0"))
    assert not [fn for fn in served.functions if fn.physfn] and len(served.hcas) == 12
    gpu = "0000:1b:00.0"
    assert refused(state, (gpu, "sriov_numvfs", "1")) == errno.EACCES  # no such attribute


def test_autoprobe_off_makes_unbound_vfs() -> None:
    state = state_of("h100")
    _, served = written(state, (PF, "sriov_drivers_autoprobe", "0"), (PF, "sriov_numvfs", "2"),
                        (PF, "sriov_drivers_autoprobe", "1"))
    vfs = [fn for fn in served.functions if fn.physfn == PF]
    assert [v.driver for v in vfs] == ["", ""]  # as made: autoprobe was off then
    assert len(served.hcas) == 12
    tree = tree_of(served)
    assert tree.resolve(f"{vfs[0].path}/driver") is None
    assert read_following_links(tree, f"{served.function(PF).path}/sriov_drivers_autoprobe") \
        == b"1\n"


def test_a_write_whose_pf_a_new_profile_lacks_is_dropped(tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture,
                                                         expected_logs: list[str]) -> None:
    book, _ = written(state_of("h100"), (PF, "sriov_numvfs", "4"),
                      ("0000:40:00.0", "sriov_numvfs", "2"))
    text = (SHIPPED_PROFILES / "h100.yaml").read_text()
    path = tmp_path / "node.yaml"
    path.write_text(text.replace('    - {bus_id: "0000:18:00.0", name: mlx5_0}', "").replace(
        '"0000:18:00.0", "0000:1b:00.0"', '"0000:1b:00.0"'))
    expected_logs.append("dropped")
    with caplog.at_level(logging.WARNING):
        served = book.merge(state_of(path))
    assert "write 0000:18:00.0/sriov_numvfs=4 dropped: 0000:18:00.0 is gone" in caplog.text
    assert list(book.writes) == [("0000:40:00.0", "sriov_numvfs")] and book.dropped == 1
    assert len([fn for fn in served.functions if fn.physfn == "0000:40:00.0"]) == 2


def test_kstrto() -> None:
    assert [kstrtoul(t, 0xFFFF) for t in ("4", "4\n", "+4", "0x10", "010", "0")] == \
        [4, 4, 4, 16, 8, 0]
    assert [kstrtobool(t) for t in ("1", "y", "Yes", "on", "0", "n", "off")] == \
        [True, True, True, True, False, False, False]
    with pytest.raises(WriteRefused):
        kstrtobool("maybe")


def test_a_removed_pf_takes_its_vfs_with_it() -> None:
    from dataclasses import replace

    from mokkafs.faults.effects import at
    from mokkafs.state import FaultSpec

    _, served = written(state_of("h100"), (PF, "sriov_numvfs", "2"))
    fault = FaultSpec("gone", "hca-removed", "mlx5_0", "control", bdf=PF, hca="mlx5_0",
                      origin=0.0)
    shown = at(replace(served, faults=(fault,)), 1.0)
    assert not [fn for fn in shown.functions if fn.bdf.startswith("0000:18:")]
