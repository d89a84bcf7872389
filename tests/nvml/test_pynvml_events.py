"""Health events through NVIDIA's own Python bindings (nvidia-ml-py) on mokkafs's NVML, in the
suite's cache mode (both passes): a consumer that registered every GPU for Xid critical
errors, blocked in nvmlEventSetWait_v2 (its thread asleep in poll), gets the Xid of a fault
applied over the control socket, with the handle of the GPU the fault names and the instance
IDs of a non-MIG GPU; a wait with nothing to deliver answers TIMEOUT; once a GPU fell off the
bus (gpu-lost, Xid 79), its handle's calls answer GPU_IS_LOST while the others answer."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.kmsg import apply, blocked_in_poll, node
from tests.helpers.mounts import wait_for
from tests.helpers.nvml import PynvmlProcess, nvml_env, view_gpus

# At each line of stdin: "wait MS" (one event, or the error), "calls" (each handle's UUID, or
# the error), "index I" (a new handle by index: its UUID, or the error). One JSON line each.
CONSUMER = """
import ctypes, json, sys, pynvml as n
n.nvmlInit()
handles = [n.nvmlDeviceGetHandleByIndex(i) for i in range(n.nvmlDeviceGetCount())]
address = [ctypes.cast(h, ctypes.c_void_p).value for h in handles]
events = n.nvmlEventSetCreate()
supported = [n.nvmlDeviceGetSupportedEventTypes(h) for h in handles]
for h in handles:
    n.nvmlDeviceRegisterEvents(h, n.nvmlEventTypeXidCriticalError, events)
def uuid(f, *a):
    try:
        return n.nvmlDeviceGetUUID(f(*a))
    except n.NVMLError as e:
        return {"error": e.value}
print(json.dumps({"supported": supported}), flush=True)
for line in iter(sys.stdin.readline, ""):
    word, _, arg = line.strip().partition(" ")
    if word == "wait":
        try:
            d = n.nvmlEventSetWait_v2(events, int(arg))
            out = {"gpu": address.index(ctypes.cast(d.device, ctypes.c_void_p).value),
                   "type": d.eventType, "xid": d.eventData,
                   "instances": [d.gpuInstanceId, d.computeInstanceId]}
        except n.NVMLError as e:
            out = {"error": e.value}
    elif word == "calls":
        out = [uuid(lambda h: h, h) for h in handles]
    else:
        out = uuid(n.nvmlDeviceGetHandleByIndex, int(arg))
    print(json.dumps(out), flush=True)
n.nvmlEventSetFree(events)
n.nvmlShutdown()
"""
XID, TIMEOUT, GPU_IS_LOST = 8, {"error": 10}, {"error": 15}
NOT_MIG = [0xFFFFFFFF, 0xFFFFFFFF]


def test_a_blocked_wait_gets_the_xid_and_a_lost_gpu_answers_gpu_is_lost(tmp_path: Path) -> None:
    with node(tmp_path) as (live, control):
        root = live.mount.path
        gpus = view_gpus(root)
        consumer = PynvmlProcess(CONSUMER, nvml_env(root))
        try:
            first = consumer.read_line()
            assert first["supported"] and all(t & XID for t in first["supported"]), first
            assert consumer.ask("wait 100") == TIMEOUT
            consumer.send("wait 120000")
            wait_for(lambda: blocked_in_poll(consumer.process.pid), 60,
                     "the consumer asleep in nvmlEventSetWait")
            apply(control, tmp_path, "  - {name: dbe, kind: xid, target: gpu2, xid: 48}\n")
            assert consumer.read_line() == {"gpu": 2, "type": XID, "xid": 48,
                                            "instances": NOT_MIG}
            apply(control, tmp_path, "  - {name: lost, kind: gpu-lost, target: gpu0}\n")
            assert consumer.ask("wait 120000") == {"gpu": 0, "type": XID, "xid": 79,
                                                   "instances": NOT_MIG}
            calls = consumer.ask("calls")
            assert calls[0] == GPU_IS_LOST
            assert calls[1:] == [g.uuid for g in gpus[1:]]
            assert consumer.ask("index 0") == GPU_IS_LOST  # a new handle: lost too
            assert consumer.ask("index 1") == gpus[1].uuid
            assert consumer.ask("wait 0") == TIMEOUT  # each Xid once
        finally:
            out = consumer.close()
        assert consumer.process.returncode == 0, out
