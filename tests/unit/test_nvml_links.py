"""A GPU's NVLink and fabric keys in NVML's own place (mokkafs.surfaces.nvml_links), and the
profile checks that keep a fabric consistent with the NVLinks and the IMEX channels."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.model.nvlink import NvLinks
from mokkafs.state import PciFunction, State
from mokkafs.surfaces.nvml_links import fabric_values, link_values
from tests.helpers.mounts import NVML_MOCK_PROFILES, SHIPPED_PROFILES
from tests.helpers.profiles import state_of


def switches(state: State) -> tuple[PciFunction, ...]:
    return tuple(sorted((fn for fn in state.functions if fn.kind == "nvswitch"),
                        key=lambda fn: fn.bdf))


def keys(state: State, gpu: int = 0) -> dict[str, object]:
    nvml = state.gpus()[gpu].gpu.nvml  # type: ignore[union-attr]
    return dict(link_values(nvml, switches(state)) + fabric_values(nvml, switches(state)))


def test_hgx_h100_links_reach_its_four_nvswitches() -> None:
    got = keys(state_of("h100"))
    assert got["nvlink_links"] == 18
    assert {got[f"nvlink.{n}.version"] for n in range(18)} == {6}  # NVML_NVLINK_VERSION_4_0
    assert {got[f"nvlink.{n}.state"] for n in range(18)} == {1}
    assert {got[f"nvlink.{n}.remote_type"] for n in range(18)} == {2}  # an NVSwitch
    spread = Counter(got[f"nvlink.{n}.remote_bus_id"] for n in range(18))
    assert spread == {"0000:a5:00.0": 5, "0000:a6:00.0": 4, "0000:a7:00.0": 5,
                      "0000:a8:00.0": 4}
    assert not any(k.startswith("fabric") for k in got)  # in no fabric


@pytest.mark.parametrize("profile", ["b200", "gb200"])
def test_switches_off_the_nodes_bus_have_no_bus_id(profile: str) -> None:
    got = keys(state_of(profile))
    assert got["nvlink_links"] == 18 and got["nvlink.0.version"] == 7  # NVLink 5
    assert got["nvlink.0.remote_bus_id"] is None  # left out of the file


def test_gb200_fabric_is_the_profiles() -> None:
    got = keys(state_of("gb200"))
    assert (got["fabric_cluster_uuid"], got["fabric_clique_id"], got["fabric_state"]) == (
        "6b200f007a1c4e0d9c3b5d4a00000072", 32766, 3)
    assert got["fabric_health_summary"] == 1 and got["fabric_health_mask"] == 0x1AA


def test_a_lost_nvswitch_downs_its_links_and_degrades_the_fabric() -> None:
    state = state_of(NVML_MOCK_PROFILES / "h100.yaml")  # a fabric and PCI NVSwitches
    first = switches(state)[0].bdf
    lost = replace(state, functions=tuple(replace(fn, lost=True) if fn.bdf == first else fn
                                          for fn in state.functions))
    got = keys(lost)
    down = [n for n in range(18) if got[f"nvlink.{n}.state"] == 0]
    assert down == [n for n in range(18) if got[f"nvlink.{n}.remote_bus_id"] == first] != []
    assert got["fabric_health_mask"] == 0x1A9 and got["fabric_health_summary"] == 3
    assert keys(state)["fabric_health_mask"] == 0x1AA  # bandwidth not degraded


def test_a_link_named_down_reads_down() -> None:
    state = state_of("h100")
    gpu = state.gpus()[0]
    nvml = replace(gpu.gpu.nvml, nvlink=NvLinks(4, 18, down=(3,)))  # type: ignore[union-attr]
    got = dict(link_values(nvml, switches(state)))
    assert [n for n in range(18) if got[f"nvlink.{n}.state"] == 0] == [3]


def refused(tmp_path: Path, profile: str, old: str, new: str) -> str:
    text = (SHIPPED_PROFILES / f"{profile}.yaml").read_text()
    assert old in text
    (tmp_path / "p.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(ProfileError) as info:
        state_of(tmp_path / "p.yaml")
    return str(info.value)


def test_a_fabric_needs_nvlink(tmp_path: Path) -> None:
    said = refused(tmp_path, "l40s", "device_defaults:\n",
                   'device_defaults:\n  fabric: {cluster_uuid: "00000000-0000-0000-0000-00000000'
                   '0001"}\n')
    assert "device_defaults.fabric" in said and "state nvlink.version" in said


def test_one_node_is_in_one_clique(tmp_path: Path) -> None:
    said = refused(tmp_path, "gb200", 'pci: {bus_id: "0009:01:00.0"}}',
                   'pci: {bus_id: "0009:01:00.0"}, fabric: {cluster_uuid: '
                   '"6b200f00-7a1c-4e0d-9c3b-5d4a00000072", clique_id: 1}}')
    assert "different clusters or cliques (2)" in said


def test_a_node_in_a_fabric_needs_imex_channels(tmp_path: Path) -> None:
    said = refused(tmp_path, "gb200", "imex: {channel_count: 2048, create_channel0: true}",
                   "imex: {channel_count: 0}")
    assert "system.imex.channel_count" in said and "IMEX channels" in said


def test_an_unknown_architecture_needs_a_link_count(tmp_path: Path) -> None:
    said = refused(tmp_path, "l40s", "device_defaults:\n", "nvlink: {version: 4}\n"
                   "device_defaults:\n")
    assert "nvlink.links_per_gpu" in said and said.count("no known NVLink count") == 1
