"""VFIO (drivers/vfio/vfio_main.c, group.c, device_cdev.c): what a function bound to vfio-pci
gets, where the profile loads vfio-pci (``system.vfio_pci``).

- ``/dev/vfio/vfio``: the container device, misc 10:196, mode 0666, while vfio is loaded.
- ``/dev/vfio/<group>``: each IOMMU group with a function bound to vfio-pci, on the ``vfio``
  major (dynamic on real kernels: a profile value, ``proc_devices.vfio``), mode 0600.
- ``<function>/vfio-dev/vfio<N>``: the device's cdev (CONFIG_VFIO_DEVICE_CDEV), with
  ``/dev/vfio/devices/vfio<N>`` on the ``vfio-dev`` major and ``/sys/class/vfio-dev/vfio<N>``.

Minors and ``N`` are the group's number: stable, and unique since every function has a group
of its own. The kernel hands them out in the order devices bind.
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import PciFunction, State
from mokkafs.surfaces.nvidia_dev import DevNode, char_nodes
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import Dir, File, Node, relative_link, text
from mokkafs.tree.roots import kernel

DRIVER = "vfio-pci"
DEV = "dev/vfio"
VFIO_MINOR = 196  # include/linux/miscdevice.h
MISC = 10
CDEV_CLASS = "sys/class/vfio-dev"


def bound(state: State) -> list[PciFunction]:
    """The functions vfio-pci drives, in bus order (each has an IOMMU group: it binds none
    without one)."""
    return [fn for fn in state.functions
            if fn.driver == DRIVER and fn.iommu_group is not None]


def device_numbers(state: State) -> list[DevNode]:
    """(/dev path, major, minor, mode) of every VFIO node: none unless vfio-pci is loaded."""
    if DRIVER not in state.pci_drivers:
        return []
    out: list[DevNode] = [(f"/{DEV}/vfio", MISC, VFIO_MINOR, 0o666)]
    group, cdev = state.major("vfio"), state.major("vfio-dev")
    for fn in bound(state):
        g = fn.iommu_group
        assert g is not None
        out.append((f"/{DEV}/{g}", group, g, 0o600))
        out.append((f"/{DEV}/devices/vfio{g}", cdev, g, 0o600))
    return out


def _uevent(major: int, minor: int, name: str) -> bytes:
    return f"MAJOR={major}\nMINOR={minor}\nDEVNAME={name}\n".encode()


def nodes(state: State) -> Iterator[Node]:
    numbers = device_numbers(state)
    if not numbers:
        return
    yield from char_nodes(DEV, [n for n in numbers if "/devices/" not in n[0]])
    functions = bound(state)
    if functions:
        yield from char_nodes(f"{DEV}/devices", [n for n in numbers if "/devices/" in n[0]])
    yield Dir(CDEV_CLASS)
    cdev = state.major("vfio-dev")
    for fn in functions:
        g = fn.iommu_group
        assert g is not None
        d = f"{fn.path}/vfio-dev/vfio{g}"
        yield Dir(f"{fn.path}/vfio-dev")
        yield Dir(d)
        yield text(f"{d}/dev", f"{cdev}:{g}")
        yield File(f"{d}/uevent", _uevent(cdev, g, f"vfio/devices/vfio{g}"), 0o644)
        yield relative_link(f"{d}/device", fn.path)
        yield relative_link(f"{d}/subsystem", CDEV_CLASS)
        yield relative_link(f"{CDEV_CLASS}/vfio{g}", d)


SURFACE = stateless("vfio", nodes, ("functions", "char_majors", "pci_drivers"),
                    (kernel(DEV), kernel(CDEV_CLASS)))
