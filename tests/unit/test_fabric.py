"""NVSwitch procfs and the NVLink management ports' PCI VPD, as State and surfaces make them."""

from __future__ import annotations

from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.profile import vpd
from mokkafs.surfaces import SURFACES, nvidia_dev, nvswitch_proc
from mokkafs.surfaces.pci_config import VPD_CAP, config_space
from mokkafs.tree.assemble import Assembler
from mokkafs.tree.nodes import File
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import state_of


def test_vpd_is_the_pci_format_with_a_good_checksum() -> None:
    data = vpd.encode("Board", [("PN", "X1"), ("SN", "42")])
    assert data[0] == 0x82 and data[1:3] == b"\x05\x00" and data[3:8] == b"Board"
    assert data[8] == 0x90 and data[-1] == 0x78
    assert sum(data[:-1]) & 0xFF == 0  # every byte through the RV checksum sums to zero
    assert vpd.decode(data) == ("Board", {"PN": b"X1", "SN": b"42", "RV": data[-2:-1]})
    broken = bytearray(data)
    broken[4] ^= 1
    with pytest.raises(ValueError, match="checksum"):
        vpd.decode(bytes(broken))


@pytest.mark.parametrize("key", ["P", "RV", "é1"])
def test_vpd_refuses_keywords_that_are_not_two_ascii_characters(key: str) -> None:
    with pytest.raises(ValueError, match="keyword"):
        vpd.encode("Board", [(key, "x")])


def test_only_the_b200_management_ports_carry_sw_mng() -> None:
    for profile in ("h100", "h200", "a100", "gb200", "gb300", "l40s", "t4"):
        assert not [fn for fn in state_of(profile).functions if fn.vpd], profile
    state = state_of("b200")
    marked = {fn.bdf: fn for fn in state.functions if fn.vpd}
    assert sorted(marked) == ["0000:e9:00.0", "0000:e9:00.1"]
    names = {h.bdf: h.name for h in state.hcas}
    assert [names[b] for b in sorted(marked)] == ["mlx5_8", "mlx5_9"]
    for fn in marked.values():
        _, keys = vpd.decode(fn.vpd)
        assert b"SMDL=SW_MNG" in keys["VA"]
        config = config_space(fn)
        assert config[0x41] == VPD_CAP and config[VPD_CAP] == 0x03  # listed after PCIe
    serials = {vpd.decode(fn.vpd)[1]["SN"] for fn in marked.values()}
    assert len(serials) == 2
    assert serials != {vpd.decode(fn.vpd)[1]["SN"] for fn in state_of(
        "b200", node_name="node-b").functions if fn.vpd}


@pytest.mark.parametrize("profile", ["h100", "h200", "a100", "b200", "gb200"])
def test_nvswitch_proc_entries_match_the_device_nodes(profile: str) -> None:
    state = state_of(profile)
    Assembler(SURFACES).build(state)  # no surface collides with the new entries
    names = {n.path for n in nvswitch_proc.nodes(state)}
    entries = sorted(p.rsplit("/", 2)[1] for p in names if p.endswith("/information"))
    dev = [p for p, *_ in nvidia_dev.device_numbers(state)
           if p.startswith("/dev/nvidia-nvswitch") and p[-1].isdigit()]
    assert dev == [f"/dev/nvidia-nvswitch{i}" for i in range(len(entries))]
    assert entries == nvidia_dev.nvswitches(state)
    assert "proc/driver/nvidia-nvswitch/devices" in names  # empty on b200 and gb200
    assert bool(entries) == (profile in ("h100", "h200", "a100"))


def test_the_permissions_file_gives_the_mode_of_the_switch_nodes() -> None:
    state = state_of("h100")
    files = {n.path: n for n in nvswitch_proc.nodes(state)}
    node = files["proc/driver/nvidia-nvswitch/permissions"]
    assert isinstance(node, File)
    text = node.read(0.0).decode()
    assert text == "DeviceFileMode: 438\n"  # procfs_nvswitch.c, read by nvidia-modprobe
    modes = {mode for p, _, _, mode in nvidia_dev.device_numbers(state) if "nvswitch" in p}
    assert modes == {int(text.split(": ")[1])}


def test_a_misspelt_role_names_the_file_the_field_and_the_choices(tmp_path: Path) -> None:
    path = tmp_path / "b200-typo.yaml"
    text = (SHIPPED_PROFILES / "b200.yaml").read_text()
    path.write_text(text.replace("role: nvlink-management}", "role: nvlink-mgmt}", 1))
    with pytest.raises(ProfileError) as caught:
        state_of(path)
    message = str(caught.value)
    assert str(path) in message and "infiniband.devices[8].role" in message
    assert "'compute' or 'nvlink-management'" in message
