"""``mokkafs preload-env``: the environment that points libc consumers at a mount; and which
kernel paths the shim sends there (``REDIRECTED``, compiled into the shim as
native/path_prefixes.h: ``python -m mokkafs.delivery.preload > native/path_prefixes.h``).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from mokkafs.errors import MokkafsError
from mokkafs.model.sysfs import BUS_PCI, PCI_BUS_CLASS
from mokkafs.surfaces import (
    cpu,
    dmi,
    infiniband,
    iommu,
    kmsg,
    modules,
    net,
    nvidia_dev,
    nvswitch_proc,
    proc_cpu_mem,
    proc_devices,
    proc_driver_nvidia,
    rdma_cm,
    vfio,
)

PACKAGE = Path(__file__).resolve().parents[1]  # where pip builds the shim

# Every path the surfaces describe outside the directories they share with the host's own
# (sys/module, sys/class/misc, ...), as whole components; /sys/devices/pciDDDD:BB, the host
# bridges, is matched by pattern in native/path_map.c. Spelled by the surfaces' own constants,
# so a path moves in one place.
REDIRECTED: tuple[str, ...] = tuple("/" + path for path in (
    BUS_PCI,
    *(f"{infiniband.SYS_CLASS}/{name}" for name in ("infiniband", "infiniband_verbs",
                                                     "infiniband_mad")),
    PCI_BUS_CLASS,
    iommu.GROUPS,
    dmi.DEVICE.rpartition("/")[0],  # the dmi device, whose id/ holds the attributes
    dmi.DMI_CLASS,
    rdma_cm.DEVICE,
    f"{rdma_cm.MISC_CLASS}/rdma_cm",
    net.CLASS_NET,  # the view's netdevs, and the host's beside them where its sysfs shows
    *(f"{modules.MODULES}/{name}" for name in modules.NAMES),
    proc_devices.PATH,
    proc_driver_nvidia.DRIVER,
    proc_driver_nvidia.CAPS,
    nvswitch_proc.NVSWITCH,
    modules.PROC_MODULES,
    cpu.CPU,
    cpu.NODE,
    proc_cpu_mem.CPUINFO,
    proc_cpu_mem.MEMINFO,
    rdma_cm.DEV.rpartition("/")[0],  # dev/infiniband: rdma_cm and the verbs and MAD nodes
    # the NVIDIA driver's nodes with fixed names (nvidia<N> and nvidia-nvswitch<N> are matched
    # by pattern in native/path_map.c)
    *(f"dev/{name}" for name in nvidia_dev.FIXED_NAMES),
    kmsg.PATH,  # the view's kernel log, never the host's
    vfio.DEV,  # dev/vfio: the container device, the groups' and the cdevs' nodes
))


def library() -> Path:
    """The shim built into the package at install time."""
    found = sorted(PACKAGE.glob("_preload*.so"))
    if not found:
        raise MokkafsError("the preload shim is not built; reinstall mokkafs "
                           "(pip install . compiles native/)")
    return found[0]


def environment(mountpoint: Path, current_preload: str = "") -> dict[str, str]:
    lib = str(library())
    preload = [lib, *(p for p in current_preload.replace(":", " ").split() if p != lib)]
    return {"LD_PRELOAD": " ".join(preload), "MOKKAFS_ROOT": os.path.abspath(mountpoint)}


def shell_exports(env: dict[str, str]) -> str:
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())


def header() -> str:
    """native/path_prefixes.h: ``REDIRECTED`` as the shim's C array."""
    lines = "".join(f'    "{prefix}",\n' for prefix in REDIRECTED)
    return ("/* SPDX-License-Identifier: Apache-2.0 */\n"
            "/* Generated from mokkafs.delivery.preload.REDIRECTED by\n"
            " *   python -m mokkafs.delivery.preload > native/path_prefixes.h\n"
            " * Do not edit: tests/unit/test_preload_paths.py checks it matches. */\n"
            "static const char *const prefixes[] = {\n" + lines + "    NULL,\n};\n")


if __name__ == "__main__":
    print(header(), end="")
