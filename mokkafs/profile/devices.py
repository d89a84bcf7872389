"""The functions a profile names: GPUs (``devices`` over ``device_defaults``) and NVSwitches,
with the identity, link and memory each has; and the BARs every function gets, allocated in
the hierarchy's depth-first order so each bridge forwards one window per kind."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from mokkafs.model.bdf import Bdf
from mokkafs.model.nvml import GpuNvml
from mokkafs.profile.nvlink import nvlinks
from mokkafs.profile.nvml import check_processes, gpu_nvml, merged
from mokkafs.profile.problems import Problems, YamlPath
from mokkafs.profile.schema import DeviceOverride, Profile
from mokkafs.state import Bar, GpuInfo, PcieLink

NVIDIA = 0x10DE
CLASS_3D = 0x030200
CLASS_BRIDGE_OTHER = 0x068000
MIB = 1 << 20

# NVSwitch PCI device ids by GPU architecture (pci.ids: 1af1 "GA100 [A100 NVSwitch]",
# 22a3 "GH100 [H100 NVSwitch]"). pci.ids has no entry for NVLink-5 switch chips yet; they
# reuse the Hopper id unless a profile names one in nvlink.switches[].device_id.
NVSWITCH_DEVICE_IDS = {"ampere": 0x1AF1, "hopper": 0x22A3}
NVSWITCH_DEFAULT_DEVICE_ID = 0x22A3
NVSWITCH_LINK = PcieLink(4, 2, 4, 2)  # NVSwitch management links are narrow
DEFAULT_VBIOS = "96.00.99.00.01"
# GPU UUIDs a profile does not give are made from the node name and the GPU's index.
GPU_UUIDS = uuid.UUID("6d6f6b6b-6166-7367-7075-000000000000")


@dataclass
class Gpu:
    index: int
    bdf: Bdf
    vendor: int
    device: int
    subsystem_vendor: int
    subsystem_device: int
    revision: int
    link: PcieLink
    bar1_size: int
    architecture: str
    where: YamlPath
    uuid: str | None
    minor: int
    model: str
    vbios: str
    serial: str
    nvml: GpuNvml

    def info(self, node_name: str) -> GpuInfo:
        made = f"GPU-{uuid.uuid5(GPU_UUIDS, f'{node_name}/{self.index}')}"
        return GpuInfo(self.index, self.minor, self.uuid or made, self.model, self.vbios,
                       self.serial, self.architecture, self.nvml)

    def bars(self) -> list[tuple[int, int, bool, bool]]:
        """(index, size, 64-bit, prefetchable) of BAR0 (registers), BAR1 (the framebuffer
        aperture) and BAR3 (doorbells), as an NVIDIA datacenter GPU has them."""
        return [(0, 16 * MIB, False, False), (1, self.bar1_size, True, True),
                (3, 32 * MIB, True, True)]


@dataclass
class NvSwitch:
    bdf: Bdf
    device: int
    where: YamlPath


def _pow2_at_least(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def gpus(profile: Profile, problems: Problems) -> list[Gpu]:
    """The GPUs (``system.num_devices``, else the ``devices`` entries, else 8), each merged
    over ``device_defaults``; every GPU needs a ``pci.bus_id``."""
    overrides: dict[int, tuple[int, DeviceOverride | None]] = {}
    for pos, entry in enumerate(profile.devices):
        if entry.index in overrides:
            problems.add(("devices", pos, "index"), f"index {entry.index} is declared twice")
        overrides[entry.index] = (pos, entry)
    count = profile.system.num_devices  # 0: a node without GPUs (a captured one)
    if count is None:
        count = len(profile.devices) or 8
    defaults = profile.device_defaults
    found: list[Gpu] = []
    defaults_checked = False
    for index in range(count):
        pos, ov = overrides.get(index, (-1, None))
        path: YamlPath = ("devices", pos) if pos >= 0 else ("device_defaults",)
        pci = ov.pci if ov else None
        device_id = (pci.device_id if pci else None) or defaults.pci.device_id
        subsystem_id = (pci.subsystem_id if pci else None) or defaults.pci.subsystem_id
        bus_id = (pci.bus_id if pci else None) or defaults.pci.bus_id
        revision = (pci.revision if pci else None) or defaults.pci.revision or 0xA1
        if device_id is None:
            problems.add((*path, "pci", "device_id"), "required: (device << 16) | vendor, "
                         "e.g. 0x233010DE for an H100 SXM5")
            continue
        if bus_id is None:
            problems.add((*path, "pci", "bus_id"),
                         f"GPU {index} needs a PCI address such as \"0000:1a:00.0\"")
            continue
        vendor = device_id & 0xFFFF or NVIDIA
        subsystem = subsystem_id if subsystem_id is not None else vendor
        pcie = ov.pcie if ov and "pcie" in ov.model_fields_set else defaults.pcie
        bar1 = (ov.bar1_memory if ov and "bar1_memory" in ov.model_fields_set
                else defaults.bar1_memory).total_bytes or 256 * MIB
        keys = merged(defaults, ov)
        given = ov is not None and "processes" in ov.model_fields_set
        if given or not defaults_checked:  # the defaults' processes once
            check_processes(keys, path if given else ("device_defaults",), problems)
            defaults_checked = defaults_checked or not given
        architecture = ((ov.architecture if ov else None) or defaults.architecture or "").lower()
        found.append(Gpu(
            index=index, bdf=bus_id, vendor=vendor, device=device_id >> 16,
            subsystem_vendor=subsystem & 0xFFFF or vendor, subsystem_device=subsystem >> 16,
            revision=revision,
            link=PcieLink(pcie.max_link_gen, pcie.max_link_width,
                          pcie.current_link_gen or pcie.max_link_gen,
                          pcie.current_link_width or pcie.max_link_width),
            bar1_size=_pow2_at_least(min(bar1, 1 << 40)),
            architecture=architecture,
            where=path, uuid=ov.uuid if ov else None,
            minor=ov.minor_number if ov and ov.minor_number is not None else index,
            model=(ov.name if ov else None) or defaults.name or "NVIDIA GPU",
            vbios=(ov.vbios_version if ov else None) or defaults.vbios_version or DEFAULT_VBIOS,
            serial=(ov.serial if ov else None) or f"{1562821083900 + index}",
            nvml=gpu_nvml(keys, nvlinks(profile.nvlink, architecture, problems)),
        ))
    return found


def nvswitches(profile: Profile, architecture: str) -> list[NvSwitch]:
    return [NvSwitch(sw.bdf, sw.device_id or NVSWITCH_DEVICE_IDS.get(
        architecture, NVSWITCH_DEFAULT_DEVICE_ID), ("nvlink", "switches", si))
            for si, sw in enumerate(profile.nvlink.switches)]


class BarAllocator:
    """Addresses for BARs: 32-bit ones below 4 GiB, 64-bit ones high, each aligned to its
    size. Called in the hierarchy's depth-first order, it gives every subtree contiguous
    ranges, which its bridges forward as one window each."""

    def __init__(self) -> None:
        self.next32 = 0x9000_0000
        self.next64 = 0x2000_0000_0000

    def take(self, index: int, size: int, is_64bit: bool, prefetchable: bool) -> Bar:
        if is_64bit:
            addr = -(-self.next64 // size) * size
            self.next64 = addr + size
        else:
            addr = -(-self.next32 // size) * size
            self.next32 = addr + size
        return Bar(index, addr, size, is_64bit, prefetchable)

    def align(self, to: int = MIB) -> None:
        """Start the next subtree on a window boundary (bridges forward 1 MiB granules)."""
        self.next32 = -(-self.next32 // to) * to
        self.next64 = -(-self.next64 // to) * to
