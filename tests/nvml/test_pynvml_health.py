"""Faults that drive NVML's values, through NVIDIA's own Python bindings (nvidia-ml-py) on
mokkafs's NVML, applied over the control socket: a hot GPU reads the fault's temperature and
throttled clocks, with thermal slowdown reasons, and reads as before once cleared; an ECC
storm's counts grow with the daemon's clock and stop when cleared, the remapped rows
following the uncorrectable errors; a consumer waiting on an event set wakes on each
uncorrectable error as a double bit ECC event and an Xid 48. Polled, never slept."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.faults import fault_node
from tests.helpers.kmsg import apply, blocked_in_poll, node
from tests.helpers.mounts import mokkafs_mount, wait_for
from tests.helpers.nvml import PynvmlProcess, nvml_env

# At each line "I": GPU I's health, one JSON line (an NVML error's code in place of a value)
HEALTH = """
import ctypes, json, sys, pynvml as n
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
def call(f, *a):
    try:
        v = f(*a)
    except n.NVMLError as e:
        return {"error": e.value}
    return list(v) if isinstance(v, (list, tuple)) else v
def sram(h):
    s = n.c_nvmlEccSramErrorStatus_v1_t()
    got = call(n.nvmlDeviceGetSramEccErrorStatus, h, ctypes.byref(s))
    return got if isinstance(got, dict) else [getattr(s, f) for f, _ in s._fields_[1:]]
for line in iter(sys.stdin.readline, ""):
    h = handles[int(line)]
    print(json.dumps({
        "temperature": call(n.nvmlDeviceGetTemperature, h, 0),
        "clocks": [call(n.nvmlDeviceGetClockInfo, h, c) for c in range(3)],
        "reasons": call(n.nvmlDeviceGetCurrentClocksEventReasons, h),
        "throttle": call(n.nvmlDeviceGetCurrentClocksThrottleReasons, h),
        "ecc_mode": call(n.nvmlDeviceGetEccMode, h),
        "ecc": [call(n.nvmlDeviceGetTotalEccErrors, h, e, c) for e in (0, 1) for c in (0, 1)],
        "dram": [call(n.nvmlDeviceGetMemoryErrorCounter, h, e, 0, 2) for e in (0, 1)],
        "l1": call(n.nvmlDeviceGetMemoryErrorCounter, h, 0, 0, 0),
        "sram": [call(n.nvmlDeviceGetMemoryErrorCounter, h, e, c, 7) for e in (0, 1)
                 for c in (0, 1)],
        "sram_status": sram(h),
        "rows": call(n.nvmlDeviceGetRemappedRows, h),
        "pages": call(n.nvmlDeviceGetRetiredPages, h, 1),
        "pending": call(n.nvmlDeviceGetRetiredPagesPendingStatus, h),
    }), flush=True)
"""
NOT_SUPPORTED = {"error": 3}
IDLE, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL = 0x1, 0x8, 0x20, 0x40



def test_a_hot_gpu_reads_hot_and_throttled_then_as_before(tmp_path: Path) -> None:
    with fault_node(tmp_path) as node_:
        process = PynvmlProcess(HEALTH, nvml_env(node_.live.mount.path))
        try:
            before = process.ask("3")
            assert before["reasons"] == before["throttle"] == IDLE
            faults = tmp_path / "hot.yaml"
            faults.write_text("faults:\n  - {name: hot, kind: gpu-hot, target: gpu3, "
                              "temperature: 94, clock_mhz: 300}\n")
            assert node_.fault("apply", str(faults)).returncode == 0
            hot = process.ask_until("3", lambda g: g["temperature"] == 94, "the GPU hot")
            assert hot["clocks"] == [300, 300, before["clocks"][2]]
            assert hot["reasons"] == IDLE | SW_THERMAL | HW_SLOWDOWN | HW_THERMAL
            assert process.ask("2")["temperature"] == before["temperature"]  # the others
            assert node_.fault("clear", "hot").returncode == 0
            cool = process.ask_until("3", lambda g: g["temperature"] == before["temperature"],
                          "the GPU as before")
            assert cool == before
        finally:
            out = process.close()
        assert process.process.returncode == 0, out


def test_an_ecc_storm_counts_with_time_and_stops_when_cleared(tmp_path: Path) -> None:
    with fault_node(tmp_path) as node_:
        process = PynvmlProcess(HEALTH, nvml_env(node_.live.mount.path))
        try:
            calm = process.ask("1")
            assert calm["ecc_mode"] == [1, 1] and calm["ecc"] == [0, 0, 0, 0]
            assert calm["rows"] == [0, 0, 0, 0]
            assert calm["pages"] == calm["pending"] == NOT_SUPPORTED  # Hopper remaps rows
            faults = tmp_path / "storm.yaml"
            faults.write_text("faults:\n  - {name: storm, kind: ecc-errors, target: gpu1, "
                              "for: 100, rates: {corrected: 10, uncorrected: 0.5}}\n")
            assert node_.fault("apply", str(faults)).returncode == 0  # at 0 s on its clock
            node_.at(17.05)  # 170 corrected, 8 uncorrected (8.5)
            got = process.ask_until("1", lambda g: g["ecc"][0] == 170, "the storm counted")
            assert got["ecc"] == [170, 170, 8, 8] and got["dram"] == [170, 8]
            assert got["l1"] == NOT_SUPPORTED
            # Hopper counts its SRAM apart; the storm's errors are the framebuffer's
            assert got["sram"] == [0, 0, 0, 0] and got["sram_status"] == [0] * 12
            assert got["rows"] == [0, 8, 1, 0]  # a row remapped for each, pending a reset
            assert process.ask("0")["ecc"] == [0, 0, 0, 0]  # the others
            node_.at(30.05)
            assert node_.fault("clear", "storm").returncode == 0
            node_.at(60.05)
            stopped = process.ask_until("1", lambda g: g["ecc"][0] == 300, "the storm's counts")
            assert stopped["ecc"] == [300, 300, 15, 15] and stopped["rows"] == [0, 15, 1, 0]
            node_.at(90.05)
            assert process.ask("1") == stopped  # cleared: nothing more counts
        finally:
            out = process.close()
        assert process.process.returncode == 0, out


# At "wait MS": the next event (GPU index, type, data), or the error
WAITER = """
import ctypes, json, sys, pynvml as n
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
address = [ctypes.cast(h, ctypes.c_void_p).value for h in handles]
events = n.nvmlEventSetCreate()
for h in handles:
    n.nvmlDeviceRegisterEvents(h, n.nvmlEventTypeXidCriticalError
                               | n.nvmlEventTypeDoubleBitEccError, events)
print(json.dumps("ready"), flush=True)
for line in iter(sys.stdin.readline, ""):
    try:
        d = n.nvmlEventSetWait_v2(events, int(line.split()[1]))
        out = [address.index(ctypes.cast(d.device, ctypes.c_void_p).value), d.eventType,
               d.eventData]
    except n.NVMLError as e:
        out = {"error": e.value}
    print(json.dumps(out), flush=True)
n.nvmlEventSetFree(events)
"""
XID, DBE = 8, 2


def test_a_waiter_wakes_on_each_uncorrectable_error(tmp_path: Path) -> None:
    with node(tmp_path) as (live, control):
        waiter = PynvmlProcess(WAITER, nvml_env(live.mount.path))
        try:
            assert waiter.read_line() == "ready"
            waiter.send("wait 120000")
            wait_for(lambda: blocked_in_poll(waiter.process.pid), 60,
                     "the waiter asleep in nvmlEventSetWait")
            apply(control, tmp_path, "  - {name: storm, kind: ecc-errors, target: gpu2, "
                                     "for: 2, rates: {corrected: 100, uncorrected: 1}}\n")
            got = [waiter.read_line(), *(waiter.ask("wait 120000") for _ in range(3))]
            assert got == [[2, XID, 48], [2, DBE, 0]] * 2  # at 1 s and 2 s
            assert waiter.ask("wait 1500") == {"error": 10}  # no more: TIMEOUT
        finally:
            out = waiter.close()
        assert waiter.process.returncode == 0, out


def test_a_gpu_before_ampere_counts_no_sram_apart(tmp_path: Path) -> None:
    """A T4 (Turing) retires pages where later GPUs remap rows, and has no SRAM count of its
    own: NVML answers NOT_SUPPORTED for both SRAM calls, as for the remapped rows."""
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "t4", "--node-name", "node-a"]) as mount:
        process = PynvmlProcess(HEALTH, nvml_env(mount.path))
        try:
            got = process.ask("0")
            assert got["ecc_mode"] == [1, 1] and got["dram"] == [0, 0]
            assert got["sram"] == [NOT_SUPPORTED] * 4 and got["sram_status"] == NOT_SUPPORTED
            assert got["rows"] == NOT_SUPPORTED and got["pending"] == 0
        finally:
            out = process.close()
        assert process.process.returncode == 0, out
