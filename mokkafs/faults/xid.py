"""The Xid lines the driver logs under the node's faults, and when: ``gpu-lost`` logs Xid 79
once at its onset, an ``xid`` fault logs its Xid once, or ``count`` times ``every`` seconds
apart; ``ecc-errors`` logs Xid 48 at each uncorrectable error (``model.ecc``). Pure:
``events(state)`` is every line any fault of ``state`` logs, past and future, in the order
of their times (the kernel log, ``mokkafs.surfaces.kmsg``, shows those whose time has come).
Formats and sources: docs/kmsg.md."""

from __future__ import annotations

import math

from mokkafs.model.ecc import EccBurst
from mokkafs.state import FaultSpec, State

# Xids a fleet's health monitors act on, with the message the driver prints for each (the
# text after "name=..., "). Representative texts from field logs (docs/kmsg.md); an ``xid``
# fault may give its own (``text``).
MESSAGES: dict[int, str] = {
    13: "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
    31: "ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ "
        "0x7f8e_a0000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "Ch 00000010",
    45: "Ch 00000010",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
        "at partition 6, subpartition 0.",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    64: "Row Remapper Error: failed to remap row, reset gpu to activate.",
    74: "NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    92: "High single-bit ECC error rate",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No",
    119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
         "(GSP_RM_CONTROL) (0x20800a4c 0x4).",
    120: "GSP task exception: (reason 0x3) at 0x0",
}
LOST_XID = 79  # what gpu-lost logs
DBE_XID = 48  # what ecc-errors logs for each uncorrectable error
# kernel_rc.c: with no channel in error, the process is unknown.
UNKNOWN_PID, UNKNOWN_NAME = "'<unknown>'", "<unknown>"

Event = tuple[float, str]  # (daemon clock time, the line's text)


def xid_line(bdf: str, xid: int, text: str | None = None) -> str:
    """The driver's line (kernel_rc.c, krcReportXid: ``NVRM: Xid (PCI:%04x:%02x:%02x): %d,
    pid=%s, name=%s, %s``) for the GPU at ``bdf`` (``0000:1b:00.0``)."""
    domain, bus, rest = bdf.split(":")
    device = rest.split(".")[0]
    message = text if text is not None else MESSAGES.get(xid, "")
    return f"NVRM: Xid (PCI:{domain}:{bus}:{device}): {xid}, pid={UNKNOWN_PID}, " \
        f"name={UNKNOWN_NAME}, {message}"


def times(spec: FaultSpec) -> list[float]:
    """The clock times the fault logs at (none before it is applied, or where it is off)."""
    if spec.origin is None or not spec.selected \
            or spec.kind not in ("gpu-lost", "xid", "ecc-errors"):
        return []
    start = spec.origin + spec.after
    if spec.kind == "ecc-errors":
        rate = dict(spec.rates).get("uncorrected", 0.0)
        end = start + spec.duration if spec.duration is not None else math.inf
        return EccBurst(0.0, rate, start, end).uncorrected_times()
    if spec.kind == "xid" and spec.every is not None and spec.count is not None:
        return [start + i * spec.every for i in range(spec.count)]
    return [start]


def events(state: State) -> list[Event]:
    """Every Xid line the faults of ``state`` log, in time order (a fault's own in its order,
    faults at one instant in the order the State holds them)."""
    out: list[tuple[float, int, int, str]] = []
    for rank, spec in enumerate(state.faults):
        if spec.bdf is None:
            continue
        xid = {"gpu-lost": LOST_XID, "ecc-errors": DBE_XID}.get(spec.kind, spec.xid)
        if xid is None:
            continue
        line = xid_line(spec.bdf, xid, spec.text)
        out += [(t, rank, i, line) for i, t in enumerate(times(spec))]
    out.sort()
    return [(t, line) for t, _, _, line in out]
