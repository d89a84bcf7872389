"""Processes in MIG instances (mokkafs.profile.nvml, mokkafs.model.nvml.running): a process
names its GPU and compute instance, both or neither, and only instances its GPU's layout
holds; the GPU's file in NVML's own place lists their IDs; a process runs while its
instance does (a layout changed at run time without it lists it no more, nor counts its
memory)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.state import State
from tests.helpers.mounts import SHIPPED_PROFILES
from tests.helpers.profiles import state_of
from tests.unit.test_gpu_faults import place

MIB = 1 << 20
GPU0 = "0000:1b:00.0"  # GI 2 (CI 0), GI 4 (CIs 0 and 1), GIs 7 and 8
GPU4 = 'pci: {bus_id: "0000:9d:00.0"}'  # whole: not in MIG mode (a one-line entry)
ANCHOR = f'    pci: {{bus_id: "{GPU0}"}}\n'


def with_processes(tmp_path: Path, processes: str, anchor: str = ANCHOR) -> State:
    text = (SHIPPED_PROFILES / "h100-mig.yaml").read_text()
    assert anchor in text
    path = tmp_path / "procs.yaml"
    given = f"{anchor}, processes: {processes}" if anchor == GPU4 else \
        f"{anchor}    processes: {processes}\n"
    path.write_text(text.replace(anchor, given, 1))
    return state_of(path)


def test_the_gpus_file_names_each_processes_instances(tmp_path: Path) -> None:
    state = with_processes(tmp_path, "[{pid: 7, name: a, used_memory_mib: 100, gpu_instance: 4,"
                           " compute_instance: 1}, {pid: 8, name: b, used_memory_mib: 50}]")
    got = place(state, 0.0)
    assert (got["process.0.pid"], got["process.0.gpu_instance"],
            got["process.0.compute_instance"]) == ("7", "4", "1")
    assert "process.1.gpu_instance" not in got  # in no instance
    assert int(got["memory_used"]) == 150 * MIB


def test_a_process_ends_with_its_instance(tmp_path: Path) -> None:
    state = with_processes(tmp_path, "[{pid: 7, name: a, used_memory_mib: 100, gpu_instance: 2,"
                           " compute_instance: 0}, {pid: 8, name: b, used_memory_mib: 50, "
                           "gpu_instance: 4, compute_instance: 0}]")
    gpu = next(m for m in state.mig if m.bdf == GPU0)
    # GI 2 as a run-time change leaves it: its compute instance destroyed
    emptied = tuple(replace(g, compute=()) if g.id == 2 else g for g in gpu.instances)
    changed = replace(state, mig=tuple(replace(m, instances=emptied) if m is gpu else m
                                       for m in state.mig))
    got = place(changed, 0.0)
    assert got["process_count"] == "1" and got["process.0.pid"] == "8"
    assert int(got["memory_used"]) == 50 * MIB
    off = replace(state, mig=tuple(m for m in state.mig if m is not gpu))  # MIG turned off
    assert place(off, 0.0)["process_count"] == "0"


BAD = {
    "gi-alone": ("[{pid: 7, name: a, used_memory_mib: 1, gpu_instance: 4}]", ANCHOR,
                 "devices[0].processes[0].compute_instance", "give both"),
    "ci-alone": ("[{pid: 7, name: a, used_memory_mib: 1, compute_instance: 0}]", ANCHOR,
                 "devices[0].processes[0].gpu_instance", "give both"),
    "no-such-gi": ("[{pid: 7, name: a, used_memory_mib: 1, gpu_instance: 3, "
                   "compute_instance: 0}]", ANCHOR, "devices[0].processes[0].gpu_instance",
                   "GPU 0 has no GPU instance 3 (its layout holds 2, 4, 7, 8)"),
    "no-such-ci": ("[{pid: 7, name: a, used_memory_mib: 1, gpu_instance: 2, "
                   "compute_instance: 1}]", ANCHOR, "devices[0].processes[0].compute_instance",
                   "GPU instance 2 of GPU 0 has no compute instance 1 (it holds 0)"),
    "not-mig": ("[{pid: 7, name: a, used_memory_mib: 1, gpu_instance: 2, "
                "compute_instance: 0}]", GPU4, "devices[4].processes[0].gpu_instance",
                "GPU 4 is not in MIG mode"),
    "gi-too-big": ("[{pid: 7, name: a, used_memory_mib: 1, gpu_instance: 15, "
                   "compute_instance: 0}]", ANCHOR, "devices[0].processes[0].gpu_instance",
                   "less than 15"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_process_names_an_instance_its_gpu_holds(tmp_path: Path, case: str) -> None:
    text, anchor, where, message = BAD[case]
    with pytest.raises(ProfileError) as info:
        with_processes(tmp_path, text, anchor)
    assert message in str(info.value), str(info.value)
    assert any(p.path == where for p in info.value.problems), info.value.problems
