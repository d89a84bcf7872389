"""Profiles load into the State they declare; bad input names the file, YAML path and fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mokkafs.errors import ProfileError
from tests.helpers.mounts import NVML_MOCK_PROFILES, REPO, is_mounted
from tests.helpers.profiles import ALL_PROFILES, profile_id, state_of


@pytest.mark.parametrize("path", ALL_PROFILES, ids=profile_id)
def test_profile_serves_what_it_declares(path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    state = state_of(path)
    gpus = [f for f in state.functions if f.kind == "gpu"]
    declared = {d["pci"]["bus_id"].lower() for d in raw["devices"]}
    assert {g.bdf for g in gpus} == declared
    device_id = raw["device_defaults"]["pci"]["device_id"]
    assert all(g.device == device_id >> 16 and g.vendor == 0x10DE for g in gpus)
    switches = {s["bdf"].lower() for s in (raw.get("nvlink") or {}).get("switches") or []}
    assert {f.bdf for f in state.functions if f.kind == "nvswitch"} == switches
    ib = raw.get("infiniband") or {}
    expected_hcas = (len(ib.get("devices") or ()) or ib.get("hca_count")
                     or len(declared) * ib.get("hcas_per_gpu", 1) if ib.get("enabled") else 0)
    assert len(state.hcas) == expected_hcas
    for hca in (ib.get("devices") or ()) if ib.get("enabled") else ():
        named = next(h for h in state.hcas if h.bdf == hca["bus_id"].lower())
        assert named.name == hca.get("name", named.name)
    assert len([f for f in state.functions if f.kind == "hca"]) == expected_hcas
    for root in (raw.get("pcie_topology") or {}).get("root_complexes", []):
        rc = next(r for r in state.roots if r.id == root["id"])
        assert rc.numa_node == root["numa_node"]
        for bdf in root.get("devices") or ():
            assert state.function(bdf.lower()).root == root["id"]
        for switch in root.get("switches") or ():  # one switch: its endpoints share a parent
            uplinks = {state.function(state.function(b.lower()).parent or "").parent
                       for b in switch["devices"]}
            assert len(uplinks) == 1 and None not in uplinks, switch


def test_all_seven_nvml_mock_profiles_are_present() -> None:
    assert sorted(p.stem for p in NVML_MOCK_PROFILES.glob("*.yaml")) == [
        "a100", "b200", "gb200", "gb300", "h100", "l40s", "t4"]


def test_dgx_h100_compute_nic_shares_its_gpus_switch() -> None:
    state = state_of("h100")
    hca0 = state.function(state.hcas[0].bdf)
    assert (state.hcas[0].name, hca0.bdf, hca0.root) == ("mlx5_0", "0000:18:00.0", "pci0000:15")
    assert hca0.numa_node == 0 and hca0.device == 0x1021 and hca0.class_code == 0x020700
    # DGX H100 User Guide, Table 6: the compute NICs' RDMA names skip the storage cards'
    assert [h.name for h in state.hcas if h.bdf[5:7] in ("c0", "ce", "dc")] == [
        "mlx5_9", "mlx5_10", "mlx5_11"]
    gpu0 = state.function("0000:1b:00.0")
    assert gpu0.path == ("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/"
                         "0000:1b:00.0")
    assert hca0.path == ("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/"
                         "0000:18:00.0")


def test_derived_hca_takes_the_next_free_bus_beside_its_gpu() -> None:
    state = state_of(NVML_MOCK_PROFILES / "h100.yaml")
    gpu0 = state.gpus()[0]
    hca0 = state.function(state.hcas[0].bdf)
    taken = {int(f.bdf[5:7], 16) for f in state.functions if f.bdf != hca0.bdf}
    bus = int(gpu0.bdf[5:7], 16) + 1
    while bus in taken:
        bus += 1
    assert int(hca0.bdf[5:7], 16) == bus and hca0.root == gpu0.root
    # near enough to share GPU 0's derived switch (buses within CLUSTER_GAP)
    assert state.function(hca0.parent or "").parent == state.function(gpu0.parent or "").parent


def test_gpu_locality_follows_the_root() -> None:
    state = state_of("h100")
    gpu = state.function("0000:9d:00.0")
    assert gpu.numa_node == 1
    assert gpu.cpus == (*range(56, 112), *range(168, 224))
    assert state.nr_cpus == 224


def test_orphan_switch_goes_under_the_covering_root(tmp_path: Path) -> None:
    state = state_of(NVML_MOCK_PROFILES / "h100.yaml")
    assert state.function("0000:05:00.0").root == "pci0000:00"


# -- bad input ---------------------------------------------------------------------------

BASE = """\
device_defaults:
  pci: {device_id: 0x233010DE}
devices:
  - {index: 0, pci: {bus_id: "0000:1a:00.0"}}
  - {index: 1, pci: {bus_id: "0000:1b:00.0"}}
pcie_topology:
  root_complexes:
    - {id: "pci0000:00", numa_node: 0, devices: ["0000:1a:00.0"]}
    - {id: "pci0000:80", numa_node: 1, devices: []}
"""

BAD = {
    "yaml-syntax": (BASE.replace("devices:\n  - {index: 0", "devices:\n  - {index: 0,,"),
                    "YAML syntax error", ""),
    "unknown-top-level-key": (BASE + "gpus: 8\n", "a top-level key that is not a section", ""),
    "unknown-key": (BASE + "node: {index: 1, idx: 2}\n", "an unknown key in this section",
                    "node"),
    "wrong-type": (BASE.replace("numa_node: 1", "numa_node: one"), "valid integer",
                   "pcie_topology.root_complexes[1].numa_node"),
    "malformed-device-id": (BASE.replace("0x233010DE", "'0xH100'"), "0x233010DE",
                            "device_defaults.pci.device_id"),
    "malformed-bdf": (BASE.replace('"0000:1b:00.0"}}', '"0000:1b:0.0"}}'), "DDDD:BB:DD.F",
                      "devices[1].pci.bus_id"),
    "duplicate-bdf": (BASE.replace('"0000:1b:00.0"}}', '"0000:1A:00.0"}}'),
                      "bus_id of two GPUs", "devices"),
    "bdf-in-two-roots": (BASE.replace("devices: []", 'devices: ["0000:1a:00.0"]'),
                         "already listed under pci0000:00",
                         "pcie_topology.root_complexes[1].devices[0]"),
    "unknown-bdf-in-root": (BASE.replace("devices: []", 'devices: ["0000:99:00.0"]'),
                            "not a GPU", "pcie_topology.root_complexes[1].devices[0]"),
    "zero-hcas": (BASE + "infiniband: {enabled: true, hcas_per_gpu: 0}\n", "0 HCAs",
                  "infiniband.hca_count"),
    "too-many-hcas": (BASE + "infiniband: {enabled: true, hca_count: 200, ports_per_hca: 2}\n",
                      "exceed the 256", "infiniband.hca_count"),
    "negative-count": (BASE + "system: {num_devices: -1}\n", "greater than or equal to 0",
                       "system.num_devices"),
    "major-clash": (BASE + "proc_devices: {nvidia_uvm: 195}\n", "already used by",
                    "proc_devices.nvidia_uvm"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_profile_names_file_path_and_expectation(tmp_path: Path, case: str) -> None:
    text, expected, yaml_path = BAD[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        state_of(path)
    message = str(info.value)
    assert str(path) in message
    assert expected in message, message
    assert any(p.path == yaml_path for p in info.value.problems), info.value.problems
    problem = next(p for p in info.value.problems if p.path == yaml_path)
    assert problem.line is not None and problem.line >= 1


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(BASE.replace("numa_node: 1", "numa_node: one") + "gpus: 8\n")
    with pytest.raises(ProfileError) as info:
        state_of(path)
    assert {p.path for p in info.value.problems} == {
        "", "pcie_topology.root_complexes[1].numa_node"}


def test_unquoted_bdf_gets_a_quoting_hint(tmp_path: Path) -> None:
    path = tmp_path / "sexagesimal.yaml"
    path.write_text(BASE.replace('"0000:1b:00.0"}}', "0000:17:00.0}}"))
    with pytest.raises(ProfileError, match="quote it in YAML"):
        state_of(path)


def test_cli_exits_2_and_mounts_nothing_on_a_bad_profile(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BASE + "gpus: 8\n")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", str(path),
                             str(mnt)], capture_output=True, text=True, cwd=REPO, timeout=30)
    assert result.returncode == 2
    assert f"{path}:10: a top-level key that is not a section" in result.stderr
    assert "Traceback" not in result.stderr
    assert not any(mnt.iterdir())
    assert not is_mounted(mnt)
