"""The machine's identity around its PCI functions: DMI (``sys/class/dmi/id``), the NVIDIA
driver (``/proc/driver/nvidia``, ``sys/module``) and the character majors (``/proc/devices``)."""

from __future__ import annotations

import re
from typing import Any

from mokkafs.capture.guarded import Root
from mokkafs.capture.notes import Notes
from mokkafs.capture.reader import Unreadable
from mokkafs.surfaces import dmi, proc_cpu_mem, proc_driver_nvidia
from mokkafs.surfaces.proc_devices import PATH as PROC_DEVICES

# Read where the view's surfaces serve them
DMI = f"{dmi.DMI_CLASS}/id"
DRIVER = proc_driver_nvidia.DRIVER
TEXT_FIELDS = ("sys_vendor", "product_name", "product_version", "product_family",
               "product_sku", "board_vendor", "board_name", "board_version", "chassis_vendor",
               "chassis_version", "bios_vendor", "bios_version", "bios_date", "bios_release")
SERIAL_DIGITS = 12  # mokkafs makes serials as a prefix and 12 digits of the node's own


def _text(root: Root, path: str, notes: Notes, kind: str) -> str | None:
    try:
        return root.text(path)
    except Unreadable as exc:
        notes.add(f"{kind} not captured: {exc.reason}", path)
        return None


def platform(root: Root, arch: str, notes: Notes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if root.kind(DMI) == "absent":
        notes.add("DMI identity not captured: absent (the profile keeps mokkafs's)", DMI)
        return {"arch": arch}
    for name in TEXT_FIELDS:
        value = _text(root, f"{DMI}/{name}", notes, "DMI fields")
        if value is not None and "\n" not in value and len(value) <= 256:
            out[name] = value
    chassis = _text(root, f"{DMI}/chassis_type", notes, "DMI fields")
    if chassis and chassis.isdigit() and 1 <= int(chassis) <= 0x24:
        out["chassis_type"] = int(chassis)
    serial = _text(root, f"{DMI}/product_serial", notes, "DMI serials and UUID (root only)")
    if serial is not None:
        head = serial[:-SERIAL_DIGITS]
        if serial[-SERIAL_DIGITS:].isdigit() and re.fullmatch(r"[0-9A-Za-z-]{0,16}", head):
            out["serial_prefix"] = head
        notes.add("DMI serials and UUID: made per node name by mokkafs (a profile cannot "
                  "pin them)", f"{DMI}/product_serial")
    out["arch"] = arch
    return out


def arch(root: Root) -> str:
    try:
        cpuinfo = root.read(proc_cpu_mem.CPUINFO, 1 << 22).decode("utf-8", "replace")
    except Unreadable:
        return "x86_64"
    return "aarch64" if "CPU implementer" in cpuinfo else "x86_64"


def driver(root: Root, notes: Notes) -> dict[str, Any]:
    """``system``'s driver version and kernel module kind, where the node has the driver."""
    out: dict[str, Any] = {}
    try:
        version = root.text(f"{DRIVER}/version")
    except Unreadable:
        return out
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", version)
    if m:
        out["driver_version"] = m.group(1)
    out["kernel_modules"] = "open" if "Open Kernel Module" in version else "proprietary"
    imex = _imex(root)
    if imex:
        out["imex"] = imex
    try:
        partitioned = [e.name for e in root.listdir(f"{DRIVER}/capabilities")
                       if e.name.startswith("gpu")]
    except Unreadable:
        partitioned = []
    if partitioned:
        notes.add("MIG layouts: not captured (the driver's files name instances by ID only; "
                  "their profiles are NVML's): the GPUs boot whole",
                  f"{DRIVER}/capabilities")
    notes.add("NVIDIA driver parameters and registry: mokkafs's defaults (a profile cannot "
              "set them)", f"{DRIVER}/params")
    return out


def _imex(root: Root) -> dict[str, Any]:
    """``system.imex``: the driver's IMEX parameters (``params``) and the channels made besides
    channel 0 (``/dev/nvidia-caps-imex-channels``), where the node shows them."""
    try:
        params = root.text(f"{DRIVER}/params")
    except Unreadable:
        return {}
    found = dict(re.findall(r"^(ImexChannelCount|CreateImexChannel0): (\d+)$", params, re.M))
    if "ImexChannelCount" not in found:
        return {}
    out: dict[str, Any] = {"channel_count": int(found["ImexChannelCount"]),
                           "create_channel0": found.get("CreateImexChannel0") == "1"}
    try:
        names = [e.name for e in root.listdir("dev/nvidia-caps-imex-channels")]
    except Unreadable:
        names = []
    made = sorted(int(n[7:]) for n in names if re.fullmatch(r"channel\d+", n))
    channels = [c for c in made if not (c == 0 and out["create_channel0"])]
    if channels:
        out["channels"] = channels
    return out


def gpu_information(root: Root, bdf: str) -> dict[str, str]:
    try:
        text = root.text(f"{DRIVER}/gpus/{bdf}/information")
    except Unreadable:
        return {}
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


MAJORS = {"nvidia-frontend": "nvidia_frontend", "nvidia-uvm": "nvidia_uvm",
          "nvidia-caps": "nvidia_caps", "nvidia-caps-imex-channels": "nvidia_caps_imex_channels",
          "nvidia-nvswitch": "nvidia_nvswitch", "infiniband_verbs": "infiniband"}


def proc_devices(root: Root) -> dict[str, int]:
    try:
        text = root.text(PROC_DEVICES)
    except Unreadable:
        return {}
    out = {}
    for line in text.split("Block devices:")[0].splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1] in MAJORS:
            out[MAJORS[parts[1]]] = int(parts[0])
    return out
