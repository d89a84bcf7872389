"""A GPU's MIG keys in NVML's own place (mokkafs.surfaces.nvml_mig): the profile table of
every GPU with a MIG table, the instances of a GPU in MIG mode, as the State's layout and
the capability files have them, and nothing for a GPU without a MIG table."""

from __future__ import annotations

import re
from dataclasses import replace

from mokkafs.model.mig import ComputeInstance, GpuInstance, MigGpu
from mokkafs.model.mig_tables import CI_SLICES, ci_placements, ci_starts
from mokkafs.surfaces import nvml
from mokkafs.surfaces.nvml_mig import mig_uuid, mig_values
from mokkafs.tree.nodes import File
from tests.helpers.profiles import state_of, tree_of

ROOT = "run/mokkafs-nvml/gpus"
TABLE = {  # h100's: profile ID, slices, most, units, MiB (of 80 GiB), starts, name
    "mig_gip.0": "19 1 7 1 10240 7f 1g.10gb", "mig_gip.7": "20 1 1 1 10240 7f 1g.10gb+me",
    "mig_gip.9": "15 1 4 2 20480 55 1g.20gb", "mig_gip.1": "14 2 3 2 20480 15 2g.20gb",
    "mig_gip.2": "9 3 2 4 40960 11 3g.40gb", "mig_gip.3": "5 4 1 4 40960 1 4g.40gb",
    "mig_gip.4": "0 7 1 8 81920 1 7g.80gb",
    # the MIG user guide's H100 SXM5: SMs, CE, DEC, ENC, JPEG, OFA; CI SMs of 1, 2, 3, 4, 7
    "mig_gip_units.0": "16 1 1 0 1 0 16 0 0 0 0", "mig_gip_units.7": "16 1 1 0 1 1 16 0 0 0 0",
    "mig_gip_units.9": "26 1 1 0 1 0 26 0 0 0 0", "mig_gip_units.1": "32 2 2 0 2 0 16 32 0 0 0",
    "mig_gip_units.2": "60 3 3 0 3 0 16 32 60 0 0",
    "mig_gip_units.3": "64 4 4 0 4 0 16 32 48 64 0",
    "mig_gip_units.4": "132 8 7 0 7 1 16 32 48 64 132"}


def mig_keys(profile: str, bdf: str) -> dict[str, str]:
    tree = tree_of(state_of(profile))
    node = next(e.node for rel, e in tree.walk() if rel == f"{ROOT}/{bdf}")
    assert isinstance(node, File)
    text = node.read(0.0).decode()
    return dict(line.split("=", 1) for line in text.splitlines() if line.startswith("mig_"))


def test_a_gpu_in_mig_mode_has_its_instances() -> None:
    got = mig_keys("h100-mig", "0000:1b:00.0")
    uuid = "GPU-4d0a1b2c-0000-4000-8000-000000000000"
    assert got == {"mig_index": "0", "mig_mode_current": "1", "mig_mode_pending": "1",
                   "mig_max_devices": "7", **TABLE,
                   "mig_gi.2": "9 4 4 3", "mig_ci.2.0": f"2 3 0 {mig_uuid(uuid, 2, 0)} 3g.40gb",
                   "mig_gi.4": "14 2 2 2",
                   "mig_ci.4.0": f"0 1 1 {mig_uuid(uuid, 4, 0)} 1c.2g.20gb",
                   "mig_ci.4.1": f"0 1 0 {mig_uuid(uuid, 4, 1)} 1c.2g.20gb",
                   "mig_gi.7": "19 0 1 1", "mig_ci.7.0": f"0 1 0 {mig_uuid(uuid, 7, 0)} 1g.10gb",
                   "mig_gi.8": "19 1 1 1", "mig_ci.8.0": f"0 1 0 {mig_uuid(uuid, 8, 0)} 1g.10gb"}


def test_a_whole_gpu_has_the_table_alone() -> None:
    got = mig_keys("h100", "0000:1b:00.0")
    assert got == {"mig_index": "0", "mig_mode_current": "0", "mig_mode_pending": "0",
                   "mig_max_devices": "7", **TABLE}


def test_each_boards_counts_are_what_nvidia_smi_lists_on_one() -> None:
    """`nvidia-smi mig -lgip` on real boards (sources in mokkafs/model/mig_tables.py): an H200
    lists the H100 SXM5's; a B200 its 1g and 2g rows, and no source shows its 3g, 4g and 7g
    rows, which answer 0 (and so do their compute instances)."""
    units = {k: v for k, v in TABLE.items() if k.startswith("mig_gip_units.")}
    h200 = mig_keys("h200", state_of("h200").driven_gpus()[0].bdf)
    assert {k: v for k, v in h200.items() if k.startswith("mig_gip_units.")} == units
    b200 = mig_keys("b200", state_of("b200").driven_gpus()[0].bdf)
    assert (b200["mig_gip_units.0"], b200["mig_gip_units.7"]) == (
        "18 2 1 0 1 0 18 0 0 0 0", "18 2 1 0 1 1 18 0 0 0 0")
    assert (b200["mig_gip_units.9"], b200["mig_gip_units.1"]) == (
        "30 2 1 0 1 0 30 0 0 0 0", "36 4 2 0 2 0 18 36 0 0 0")
    assert b200["mig_gip_units.2"] == b200["mig_gip_units.4"] == "0 0 0 0 0 0 0 0 0 0 0"


def test_no_mig_table_no_keys() -> None:
    assert mig_keys("l40s", state_of("l40s").driven_gpus()[0].bdf) == {}


def test_without_the_memory_the_names_say_it() -> None:
    got = mig_keys("h200", "0000:1b:00.0")  # h200's profile states no memory
    assert got["mig_gip.0"] == "19 1 7 1 18432 7f 1g.18gb"
    assert got["mig_gip.4"] == "0 7 1 8 144384 1 7g.141gb"
    assert got["mig_gip_units.4"] == TABLE["mig_gip_units.4"]  # an H100 SXM5's 132 SMs


def test_uuids_are_the_real_drivers_form_and_stable() -> None:
    one = mig_uuid("GPU-4d0a1b2c-0000-4000-8000-000000000000", 2, 0)
    assert re.fullmatch(r"MIG-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                        one)
    assert one == mig_uuid("GPU-4d0a1b2c-0000-4000-8000-000000000000", 2, 0)
    assert one != mig_uuid("GPU-4d0a1b2c-0000-4000-8000-000000000000", 2, 1)
    assert one != mig_uuid("GPU-4d0a1b2c-0000-4000-8000-000000000001", 2, 0)


def test_a_layout_change_changes_the_keys() -> None:
    state = state_of("h100-mig")
    fn = next(f for f in state.driven_gpus() if f.bdf == "0000:61:00.0")
    gi = GpuInstance(1, "3g.40gb", 9, 0, 4, 3, (ComputeInstance(0, "1c.3g.40gb", 1, 0),))
    changed = replace(state, mig=tuple(MigGpu(g.bdf, g.minor, (gi,)) if g.bdf == fn.bdf else g
                                       for g in state.mig))
    keys = {k: str(v) for k, v in mig_values(fn, changed.mig)}
    assert [k for k in keys if k.startswith(("mig_gi.", "mig_ci."))] == ["mig_gi.1", "mig_ci.1.0"]
    assert keys["mig_ci.1.0"].split()[:3] == ["0", "1", "0"]
    assert "mig" in nvml.SURFACE.inputs  # the place is computed again when the layout changes


def test_compute_placements_are_nvidia_smis_and_each_fits_the_rest() -> None:
    """`nvidia-smi mig -lcipp`'s placements on a 7-slice GPU instance; unplaced compute
    instances each at the highest start that lets the others fit, a given start kept."""
    assert [ci_starts(s, 7) for s in CI_SLICES] == [
        (0, 1, 2, 3, 4, 5, 6), (0, 2, 4), (0, 4), (0,), (0,)]
    assert [ci_starts(s, 3) for s in (1, 2, 3)] == [(0, 1, 2), (0,), (0,)]
    assert ci_placements([(1, None), (2, None)], 3) == [2, 0]
    assert ci_placements([(3, None), (2, None), (2, None)], 7) == [4, 2, 0]
    assert ci_placements([(2, None), (3, 0)], 7) == [4, 0]  # the given one first
    assert ci_placements([(2, None), (2, None), (2, None), (1, None)], 7) == [4, 2, 0, 6]
    assert ci_placements([(3, None), (3, None), (1, None)], 7) == [4, 0, 3]
    assert ci_placements([(4, None), (4, None)], 7) is None  # a 4c starts at 0 only
    assert ci_placements([(2, 1)], 7) == [1]  # kept as given (the checks refuse it)
