"""``mokkafs preload-env``: the environment that points libc consumers at a mount; and which
kernel paths the shim sends there (``REDIRECTED``, compiled into the shim as
native/path_prefixes.h: ``python -m mokkafs.delivery.preload > native/path_prefixes.h``).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from mokkafs.errors import MokkafsError
from mokkafs.surfaces import modules

PACKAGE = Path(__file__).resolve().parents[1]  # where pip builds the shim

# Every path the surfaces describe outside the directories they share with the host's own
# (sys/module, sys/class/misc, ...), as whole components; /sys/devices/pciDDDD:BB, the host
# bridges, is matched by pattern in native/path_map.c.
REDIRECTED: tuple[str, ...] = (
    "/sys/bus/pci",
    "/sys/class/infiniband",
    "/sys/class/infiniband_verbs",
    "/sys/class/infiniband_mad",
    "/sys/class/pci_bus",
    "/sys/kernel/iommu_groups",
    "/sys/devices/virtual/dmi",
    "/sys/class/dmi",
    "/sys/devices/virtual/misc/rdma_cm",
    "/sys/class/misc/rdma_cm",
    *(f"/sys/module/{name}" for name in modules.NAMES),
    "/proc/devices",
    "/proc/driver/nvidia",
    "/proc/driver/nvidia-caps",
    "/proc/modules",
    "/dev/infiniband",
)


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
