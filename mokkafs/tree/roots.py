"""The places a surface owns: its roots, each a path below the mount root and all below it.

Each surface declares its roots in its record (``mokkafs.tree.assemble.Surface``), and
``mokkafs.surfaces.ROOTS`` lists them all. What hands the view on is derived from that one list:

- the preload shim's prefixes and patterns (``mokkafs.delivery.prefixes``, compiled into the
  shim as native/path_prefixes.h): the roots with ``shim``;
- the CDI spec's binds over the container's /proc (``mokkafs.delivery.cdi``): the roots with
  ``hook``. runc refuses mounts inside /proc, so a createContainer hook binds them;
- what a capture reads: kernel paths only, never the daemon's own places (neither).

A root is one of three kinds:

- a kernel path the shim maps (``kernel``): CDI's /sys mount or a device node carries it into a
  container;
- a kernel path below /proc that CDI's hook binds over the container's own (``bound``); the
  shim maps it too, unless the shim maps only the roots below it (``proc/driver``, whose
  ``nvidia*`` parts are the view's and whose others are the host's);
- the daemon's own place (``own``, NVML's ``run/mokkafs-nvml``): no kernel has it, so neither
  the shim nor CDI maps it, and no capture reads it. NVML reads it below ``MOKKAFS_ROOT``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a root's path matches: "path", as whole components; "numbered", the path followed by
# digits (``dev/nvidia`` -> ``dev/nvidia0``); "bus", the path followed by a PCI domain and bus
# in lower-case hex (``sys/devices/pci`` -> ``sys/devices/pci0000:18``).
Form = Literal["path", "numbered", "bus"]
KERNEL_TOPS = ("sys", "proc", "dev")  # where every kernel path lies


@dataclass(frozen=True, slots=True)
class Root:
    """``path`` below the mount root; ``shim``: the preload shim sends it to the mount;
    ``hook``: CDI's createContainer hook binds it over the container's own."""

    path: str
    shim: bool = True
    hook: bool = False
    form: Form = "path"

    @property
    def own(self) -> bool:
        """The daemon's own place: no kernel path."""
        return not (self.shim or self.hook)


def kernel(path: str, form: Form = "path") -> Root:
    """A kernel path the shim maps."""
    return Root(path, form=form)


def bound(path: str, shim: bool = True) -> Root:
    """A kernel path below /proc that CDI's hook binds; ``shim=False``: the shim maps only the
    roots other surfaces declare below it."""
    return Root(path, shim=shim, hook=True)


def own(path: str) -> Root:
    """The daemon's own place, below the mount root only."""
    return Root(path, shim=False)
