"""The NVIDIA driver's procfs (NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c
and nv-caps.c): ``proc/driver/nvidia/`` and ``proc/driver/nvidia-caps/``.

- ``version``: the NVRM line (open or proprietary flavour, the driver version, the CPU
  architecture) and the compiler line, two spaces between fields as the driver prints them.
- ``params``: the module options, ``Name: value`` (unsigned) then the quoted string options.
- ``registry`` and each GPU's: the binary registry keys written so far (none).
- ``gpus/<bdf>/information``: model, IRQ, UUID, VBIOS, bus location and device minor of each
  GPU, with the driver's literal tabs; ``power``: runtime D3 and power limits.
- ``capabilities/mig/{config,monitor}`` and ``capabilities/fabric-imex-mgmt``: the
  capability files (minor, mode in decimal, modify) whose device nodes are
  ``/dev/nvidia-caps/nvidia-cap<minor>`` on the ``nvidia-caps`` major of proc/devices; the
  DRA driver reads fabric-imex-mgmt for compute domains.
- ``proc/driver/nvidia-caps/{mig-minors,nvlink-minors,sys-minors}``: the whole minor table
  (the device plugin maps MIG devices from mig-minors).

The directory exists whenever the profile has GPUs: the DRA driver refuses to start without
a readable /proc/driver/nvidia. ``proc/driver`` itself always exists, since containers get
it in place of their own.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

from mokkafs.model.mig_tables import MAX_CIS, MAX_GIS, MAX_GPUS
from mokkafs.state import PciFunction, State
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node
from mokkafs.tree.roots import bound, kernel

PROC_DRIVER = "proc/driver"
DRIVER = f"{PROC_DRIVER}/nvidia"
CAPS = f"{PROC_DRIVER}/nvidia-caps"

# A release build's signature: the builder, the date, the compiler (a fixed build, so a
# profile's version alone decides the text).
BUILDER = "dvs-builder@U16-I3-B03-4-3"
BUILT = "Fri Feb 28 07:03:16 UTC 2025"
GCC = "gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04) "

# nv_parms[] (kernel-open/nvidia/nv-reg.h) with their defaults, in the driver's order
PARAMS: tuple[tuple[str, int], ...] = (
    ("ResmanDebugLevel", 4294967295), ("RmLogonRC", 1), ("ModifyDeviceFiles", 1),
    ("DeviceFileUID", 0), ("DeviceFileGID", 0), ("DeviceFileMode", 438),
    ("InitializeSystemMemoryAllocations", 1), ("UsePageAttributeTable", 4294967295),
    ("EnableMSI", 1), ("RegisterForACPIEvents", 1), ("EnablePCIeGen3", 0),
    ("MemoryPoolSize", 0), ("KMallocHeapMaxSize", 0), ("VMallocHeapMaxSize", 0),
    ("IgnoreMMIOCheck", 0), ("TCEBypassMode", 0), ("EnableStreamMemOPs", 0),
    ("EnableUserNUMAManagement", 1), ("NvLinkDisable", 0), ("RmProfilingAdminOnly", 1),
    ("PreserveVideoMemoryAllocations", 0), ("EnableS0ixPowerManagement", 0),
    ("S0ixPowerManagementVideoMemoryThreshold", 256), ("DynamicPowerManagement", 3),
    ("DynamicPowerManagementVideoMemoryThreshold", 200), ("RegisterPCIDriver", 1),
    ("EnablePCIERelaxedOrderingMode", 0), ("EnableGpuFirmware", 18),
    ("EnableGpuFirmwareLogs", 2), ("EnableDbgBreakpoint", 0),
    ("OpenRmEnableUnsupportedGpus", 0), ("ImexChannelCount", 2048), ("CreateImexChannel0", 0),
)
STRING_PARAMS = ("RegistryDwords", "RegistryDwordsPerDevice", "RmMsg", "GpuBlacklist",
                 "TemporaryFilePath", "ExcludedGpus")

# nv-caps.c's minor table: fabric-mgmt 0, mig config 1 and monitor 2, then per GPU (32) and
# GPU instance (15) an access minor followed by its 8 compute instances', then the sys table.
MIG_CONFIG_MINOR, MIG_MONITOR_MINOR = 1, 2
FIRST_GPU_MINOR = 3
PER_GPU = MAX_GIS * (1 + MAX_CIS)
FABRIC_IMEX_MGMT = FIRST_GPU_MINOR + MAX_GPUS * PER_GPU  # 4323
MODE_ROOT, MODE_ALL_READ = 0o400, 0o444


def version_text(state: State) -> str:
    arch, version = state.platform.arch, state.driver.version
    if state.driver.kernel_modules == "open":
        nvrm = (f"NVIDIA UNIX Open Kernel Module for {arch}  {version}  Release Build  "
                f"({BUILDER})  {BUILT}")
    else:
        nvrm = f"NVIDIA UNIX {arch} Kernel Module  {version}  {BUILT}"
    return f"NVRM version: {nvrm}\nGCC version:  {GCC}\n"


def params_text(state: State | None = None) -> str:
    """The module options, with the State's IMEX parameters (``State.imex``)."""
    imex = {} if state is None else {"ImexChannelCount": state.imex.channel_count,
                                     "CreateImexChannel0": int(state.imex.create_channel0)}
    numbers = "".join(f"{name}: {imex.get(name, value)}\n" for name, value in PARAMS)
    return numbers + "".join(f'{name}: ""\n' for name in STRING_PARAMS)


def dma_bits(architecture: str) -> int:
    """How many address bits the GPU's DMA engines use: 52 from Hopper on, 47 before."""
    return 52 if architecture in ("hopper", "blackwell") else 47


def information_text(fn: PciFunction, state: State) -> str:
    gpu = fn.gpu
    assert gpu is not None
    bits = dma_bits(gpu.architecture)
    return (f"Model: \t\t {gpu.model}\n"
            f"IRQ:   \t\t {fn.irq}\n"
            f"GPU UUID: \t {gpu.uuid}\n"
            f"Video BIOS: \t {gpu.vbios.lower()}\n"
            f"Bus Type: \t PCIe\n"
            f"DMA Size: \t {bits} bits\n"
            f"DMA Mask: \t {(1 << bits) - 1:#x}\n"
            f"Bus Location: \t {fn.bdf}\n"
            f"Device Minor: \t {gpu.minor}\n"
            f"GPU Firmware: \t {state.driver.version}\n"  # GSP firmware ships with the driver
            f"GPU Excluded:\t No\n")


POWER = ("Runtime D3 status:          Not supported\n"
         "Video Memory:               Active\n\n"
         "GPU Hardware Support:\n"
         " Video Memory Self Refresh: Not supported\n"
         " Video Memory Off:          Not supported\n\n"
         "Power Limits:\n"
         " Default:                   N/A milliwatts\n"
         " GPU Boost:                 N/A milliwatts\n")


def capability(minor: int, mode: int) -> str:
    return f"DeviceFileMinor: {minor}\nDeviceFileMode: {mode}\nDeviceFileModify: 1\n"


@functools.cache
def mig_minors() -> bytes:
    lines = [f"config {MIG_CONFIG_MINOR}\n", f"monitor {MIG_MONITOR_MINOR}\n"]
    for g in range(MAX_GPUS):
        for i in range(MAX_GIS):
            base = FIRST_GPU_MINOR + g * PER_GPU + i * (1 + MAX_CIS)
            lines.append(f"gpu{g}/gi{i}/access {base}\n")
            lines += [f"gpu{g}/gi{i}/ci{c}/access {base + 1 + c}\n" for c in range(MAX_CIS)]
    return "".join(lines).encode()


def nodes(state: State) -> Iterator[Node]:
    yield Dir(PROC_DRIVER)  # always: containers get it bound over their own
    if "nvidia" not in state.pci_drivers:  # (faults that remove every GPU leave it loaded)
        return
    gpus = state.driven_gpus()  # unbound: no entry
    yield Dir(DRIVER)
    yield File(f"{DRIVER}/version", version_text(state).encode())
    yield File(f"{DRIVER}/params", params_text(state).encode())
    yield File(f"{DRIVER}/registry", b'Binary: ""\n', 0o644)
    yield File(f"{DRIVER}/suspend", b"suspend hibernate resume\n", 0o644)
    yield File(f"{DRIVER}/suspend_depth", b"default modeset uvm\n", 0o644)
    for extra in ("warnings", "patches"):
        yield Dir(f"{DRIVER}/{extra}")
        yield File(f"{DRIVER}/{extra}/README", b"", 0o444)
    yield Dir(f"{DRIVER}/gpus")
    for fn in gpus:
        d = f"{DRIVER}/gpus/{fn.bdf}"
        yield Dir(d)
        yield File(f"{d}/information", information_text(fn, state).encode())
        yield File(f"{d}/registry", b'Binary: ""\n', 0o644)
        yield File(f"{d}/power", POWER.encode())
    caps = f"{DRIVER}/capabilities"
    yield Dir(caps)
    yield Dir(f"{caps}/mig")
    yield File(f"{caps}/mig/config", capability(MIG_CONFIG_MINOR, MODE_ROOT).encode())
    yield File(f"{caps}/mig/monitor", capability(MIG_MONITOR_MINOR, MODE_ALL_READ).encode())
    yield File(f"{caps}/fabric-imex-mgmt", capability(FABRIC_IMEX_MGMT, MODE_ROOT).encode())
    yield Dir(CAPS)
    yield File(f"{CAPS}/mig-minors", mig_minors())
    yield File(f"{CAPS}/nvlink-minors", b"fabric-mgmt 0\n")
    yield File(f"{CAPS}/sys-minors", f"fabric-imex-mgmt {FABRIC_IMEX_MGMT}\n".encode())


# Containers get the view's whole proc/driver; the shim sends only the driver's parts there,
# and the host's others (rtc) stay the host's.
SURFACE = stateless("proc_driver_nvidia", nodes,
                    ("functions", "driver", "platform", "pci_drivers", "imex"),
                    (bound(PROC_DRIVER, shim=False), kernel(DRIVER), kernel(CAPS)))
