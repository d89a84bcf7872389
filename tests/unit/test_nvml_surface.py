"""NVML's own place (mokkafs.surfaces.nvml): one key=value file per GPU the driver lists and a
system file, under run/mokkafs-nvml and nowhere else; values as the profile states them,
keys it cannot state left out, the energy counter moving with time at the power draw."""

from __future__ import annotations

from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.surfaces import nvml
from mokkafs.tree.nodes import File
from tests.helpers.mounts import NVML_MOCK_PROFILES, SHIPPED_PROFILES
from tests.helpers.profiles import state_of, tree_of

ROOT = "run/mokkafs-nvml"


def files(profile: str | Path) -> dict[str, File]:
    tree = tree_of(state_of(profile))
    return {rel: e.node for rel, e in tree.walk()
            if rel.startswith(ROOT) and isinstance(e.node, File)}


def values(node: File, now: float = 0.0) -> dict[str, str]:
    return dict(line.split("=", 1) for line in node.read(now).decode().splitlines())


def without_links(got: dict[str, str]) -> dict[str, str]:
    """The keys but the NVLinks' and MIG's (tests/unit/test_nvml_links.py,
    tests/unit/test_nvml_mig.py)."""
    return {k: v for k, v in got.items() if not k.startswith(("nvlink", "mig_"))}


def test_one_file_per_driven_gpu_and_nothing_under_sys_or_proc() -> None:
    state = state_of("h100")
    made = list(nvml.nodes(state))
    assert all(n.path == "run" or n.path.startswith(f"{ROOT}") for n in made)
    assert sorted(files("h100")) == sorted(
        [f"{ROOT}/system"] + [f"{ROOT}/gpus/{fn.bdf}" for fn in state.driven_gpus()])


def test_h100_values_are_the_profiles() -> None:
    got = without_links(values(files("h100")[f"{ROOT}/gpus/0000:1b:00.0"]))
    assert got == {
        "architecture": "9", "brand": "14", "serial": "1562821083900",
        "board_part_number": "699-21010-0200-000", "cuda_cc_major": "9", "cuda_cc_minor": "0",
        "memory_total": "85899345920", "memory_reserved": "1073741824", "memory_used": "0",
        "clock_graphics": "345", "clock_sm": "345", "clock_memory": "1593",
        "max_clock_graphics": "1980", "max_clock_sm": "1980", "max_clock_memory": "1593",
        "power_usage": "95000", "power_limit": "700000", "enforced_power_limit": "700000",
        "temperature_gpu": "34", "utilization_gpu": "0", "utilization_memory": "0",
        "performance_state": "0", "persistence_mode": "1", "compute_mode": "0",
        "ecc_current": "1", "ecc_pending": "1", "clocks_event_reasons": "1",
        "process_count": "0", "energy": "600000",
        "ecc_volatile_corrected": "0", "ecc_volatile_uncorrected": "0",
        "ecc_aggregate_corrected": "0", "ecc_aggregate_uncorrected": "0",
        "remapped_rows_correctable": "0", "remapped_rows_uncorrectable": "0",
        "remapped_rows_pending": "0", "remapped_rows_failure": "0"}  # no fan: left out


def test_energy_grows_at_the_power_draw_in_quantum_steps() -> None:
    node = files("h100")[f"{ROOT}/gpus/0000:1b:00.0"]  # started_at 0, draw 95 W
    assert node.dynamic and node.quantum == pytest.approx(0.1)
    assert values(node, 10.0)["energy"] == str(600000 + 95000 * 10)
    assert values(node, 10.05)["energy"] == values(node, 10.0)["energy"]  # one step
    assert int(values(node, 20.0)["energy"]) > int(values(node, 10.0)["energy"])


def test_a_profile_without_the_values_leaves_them_out() -> None:
    got = without_links(values(files("h200")[f"{ROOT}/gpus/0000:1b:00.0"]))
    assert got == {"architecture": "9", "serial": "1562821083900", "process_count": "0"}
    assert not files("h200")[f"{ROOT}/gpus/0000:1b:00.0"].dynamic  # no draw: nothing moves


def test_the_cuda_version_an_nvml_mock_profile_states() -> None:
    assert files(NVML_MOCK_PROFILES / "h100.yaml")[f"{ROOT}/system"].read(0) == \
        b"cuda_driver_version=12040\n"
    assert files("h100")[f"{ROOT}/system"].read(0) == b""  # the library derives it


def test_a_devices_entry_replaces_a_section(tmp_path: Path) -> None:
    text = (SHIPPED_PROFILES / "h100.yaml").read_text().replace(
        'pci: {bus_id: "0000:43:00.0"}}',
        'pci: {bus_id: "0000:43:00.0"}, memory: {total_bytes: 1000, used_bytes: 5}}')
    (tmp_path / "p.yaml").write_text(text)
    got = values(files(tmp_path / "p.yaml")[f"{ROOT}/gpus/0000:43:00.0"])
    # the entry's memory section: no reserve stated, the documented default (at most the total)
    assert (got["memory_total"], got["memory_reserved"], got["memory_used"]) == ("1000", "1000",
                                                                                 "0")


@pytest.mark.parametrize(("yaml_text", "message"), [
    ("brand: nvidea", "unknown brand 'nvidea'"),
    ("performance_state: P16", "device_defaults.performance_state"),
    ("fan: {count: 1, speed_percent: 130}", "device_defaults.fan.speed_percent"),
])
def test_bad_values_name_the_field(tmp_path: Path, yaml_text: str, message: str) -> None:
    text = (SHIPPED_PROFILES / "h200.yaml").read_text().replace(
        "device_defaults:\n", f"device_defaults:\n  {yaml_text}\n")
    (tmp_path / "p.yaml").write_text(text)
    with pytest.raises(ProfileError, match=message.replace(".", r"\.")):
        state_of(tmp_path / "p.yaml")
