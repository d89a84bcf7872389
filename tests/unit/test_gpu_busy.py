"""Running processes (mokkafs.surfaces.nvml, mokkafs.faults.gpu): the profile's processes and a
gpu-busy fault's in a GPU's file in NVML's own place, as arithmetic of the State and the
time: memory used holding theirs, the utilization and the idle reason following, the fault's
process gone when it ends or is cleared; bad processes and faults refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from mokkafs.errors import ProfileError
from mokkafs.faults.effects import applied, carry
from mokkafs.state import State
from tests.helpers.faults import H100, with_faults
from tests.helpers.profiles import state_of
from tests.unit.test_gpu_faults import place

MIB = 1 << 20
GPU1 = "0000:43:00.0"
BUSY = ("  - {name: busy, kind: gpu-busy, target: gpu0, pid: 4242, process: python3, "
        "memory_mib: 20480, utilization_gpu: 97, utilization_memory: 41, after: 10, for: 20}\n")


def with_processes(tmp_path: Path, processes: str, where: str = "device_defaults:\n") -> State:
    path = tmp_path / "procs.yaml"
    path.write_text(H100.replace(where, f"{where}  processes: {processes}\n", 1))
    return state_of(path)


def processes(values: dict[str, str]) -> list[tuple[str, str, int]]:
    return [(values[f"process.{i}.pid"], values[f"process.{i}.name"],
             int(values[f"process.{i}.memory"]) // MIB)
            for i in range(int(values["process_count"]))]


def test_an_idle_gpu_runs_nothing(tmp_path: Path) -> None:
    got = place(with_faults(tmp_path, "  []\n"), 0.0)
    assert got["process_count"] == "0" and got["memory_used"] == "0"
    assert got["clocks_event_reasons"] == "1"  # GpuIdle


def test_the_profiles_processes_run_and_hold_their_memory(tmp_path: Path) -> None:
    state = with_processes(tmp_path, "[{pid: 1234, name: /usr/bin/python3, "
                                     "used_memory_mib: 1024}, {pid: 77, name: trainer, "
                                     "used_memory_mib: 512}]")
    got = place(state, 0.0)
    assert processes(got) == [("1234", "/usr/bin/python3", 1024), ("77", "trainer", 512)]
    assert int(got["memory_used"]) == 1536 * MIB
    assert got["memory_reserved"] == str(1 << 30)  # the reserve stays apart
    assert got["utilization_gpu"] == "0"  # the profile's: processes alone change no rate
    assert got["clocks_event_reasons"] == "0"  # not idle: something runs
    assert processes(place(state, 0.0, GPU1))[0][0] == "1234"  # every GPU: the defaults'


def test_a_busy_gpu_runs_the_process_while_the_fault_acts(tmp_path: Path) -> None:
    state = applied(with_faults(tmp_path, BUSY), 0.0)
    before, busy, after = place(state, 5.0), place(state, 15.0), place(state, 35.0)
    assert before["process_count"] == after["process_count"] == "0"
    assert processes(busy) == [("4242", "python3", 20480)]
    assert int(busy["memory_used"]) == 20480 * MIB
    assert (busy["utilization_gpu"], busy["utilization_memory"]) == ("97", "41")
    assert busy["clocks_event_reasons"] == "0"
    del before["energy"], after["energy"]  # (it grows with the time)
    assert after == before  # ended: gone
    assert place(state, 15.0, GPU1)["process_count"] == "0"  # the others
    cleared = carry(state, with_faults(tmp_path, "  []\n"), 15.0)
    assert place(cleared, 15.0)["process_count"] == "0"
    plain = applied(with_faults(tmp_path, "  - {name: b, kind: gpu-busy, target: gpu0, "
                                          "pid: 9, process: a.out, memory_mib: 0}\n"), 0.0)
    got = place(plain, 1.0)
    assert (got["utilization_gpu"], got["utilization_memory"]) == ("100", "0")


def test_a_busy_gpu_adds_to_the_profiles_processes(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text(H100.replace("device_defaults:\n", "device_defaults:\n  processes: "
                                 "[{pid: 1, name: init, used_memory_mib: 100}]\n", 1)
                    + "faults:\n" + BUSY)
    got = place(applied(state_of(path), 0.0), 15.0)
    assert processes(got) == [("1", "init", 100), ("4242", "python3", 20480)]
    assert int(got["memory_used"]) == 20580 * MIB


BAD_PROCESSES = {
    "too-many": ("[" + ", ".join(f"{{pid: {i}, name: p, used_memory_mib: 1}}"
                                 for i in range(1, 6)) + "]",
                 "device_defaults.processes", "at most 4"),
    "twice": ("[{pid: 5, name: a, used_memory_mib: 1}, {pid: 5, name: b, used_memory_mib: 1}]",
              "device_defaults.processes[1].pid", "listed twice"),
    "too-big": ("[{pid: 5, name: a, used_memory_mib: 90000}]", "device_defaults.processes",
                "lower used_memory_mib"),
    "pid-0": ("[{pid: 0, name: a, used_memory_mib: 1}]", "device_defaults.processes[0].pid",
              "greater than or equal to 1"),
    "no-name": ("[{pid: 3, used_memory_mib: 1}]", "device_defaults.processes[0].name",
                "required"),
    "two-lines": ("[{pid: 3, name: \"a\\nb\", used_memory_mib: 1}]",
                  "device_defaults.processes[0].name", "pattern"),
    "typo": ("[{pid: 3, name: a, used_mem_mib: 1}]", "device_defaults.processes[0]",
             "unknown key"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROCESSES))
def test_bad_processes_name_the_field(tmp_path: Path, case: str) -> None:
    text, where, message = BAD_PROCESSES[case]
    with pytest.raises(ProfileError) as info:
        with_processes(tmp_path, text)
    assert message in str(info.value), str(info.value)
    assert any(p.path.startswith(where) for p in info.value.problems), info.value.problems


BAD_FAULTS = {
    "no-pid": ("  - {name: a, kind: gpu-busy, target: gpu0, process: p, memory_mib: 1}\n",
               "faults[0].pid", "needs pid"),
    "no-memory": ("  - {name: a, kind: gpu-busy, target: gpu0, pid: 3, process: p}\n",
                  "faults[0].memory_mib", "needs memory_mib"),
    "too-big": ("  - {name: a, kind: gpu-busy, target: gpu0, pid: 3, process: p, "
                "memory_mib: 90000}\n", "faults[0].memory_mib", "MiB free"),
    "over-100": ("  - {name: a, kind: gpu-busy, target: gpu0, pid: 3, process: p, "
                 "memory_mib: 1, utilization_gpu: 101}\n", "faults[0].utilization_gpu",
                 "less than or equal to 100"),
    "pid-on-hot": ("  - {name: a, kind: gpu-hot, target: gpu0, temperature: 90, pid: 3}\n",
                   "faults[0].pid", "gpu-hot does not use pid"),
}


@pytest.mark.parametrize("case", sorted(BAD_FAULTS))
def test_a_bad_busy_fault_names_the_field(tmp_path: Path, case: str) -> None:
    text, where, message = BAD_FAULTS[case]
    with pytest.raises(ProfileError) as info:
        with_faults(tmp_path, text)
    assert message in str(info.value), str(info.value)
    assert any(p.path == where for p in info.value.problems), info.value.problems
