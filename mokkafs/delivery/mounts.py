"""A serving mount, as the commands that hand it to containers check it: that it serves, what
character devices, /proc files and NVML place it serves, and that its parent may be given
away."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from mokkafs.delivery.cdi import PROC_MACHINE, DeviceNode
from mokkafs.errors import CdiError, MountError
from mokkafs.host.mountinfo import FSTYPE, mounted_at
from mokkafs.surfaces.nvml import ROOT as NVML_PLACE


def served_device_nodes(mountpoint: Path) -> list[DeviceNode]:
    """The character devices a serving mount describes: its ``dev/``, walked (the RDMA and
    NVIDIA nodes; ``mokkafs.surfaces.dev`` lists the same for the daemon's own spec)."""
    nodes: list[DeviceNode] = []
    base = mountpoint / "dev"
    for top, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            st = os.lstat(path)
            if stat.S_ISCHR(st.st_mode):
                nodes.append(("/" + os.path.relpath(path, mountpoint), os.major(st.st_rdev),
                              os.minor(st.st_rdev), stat.S_IMODE(st.st_mode)))
    return nodes


def serves_machine(mountpoint: Path) -> bool:
    """Whether a serving mount serves the machine's /proc files (``PROC_MACHINE``)."""
    return all((mountpoint / "proc" / name).is_file() for name in PROC_MACHINE)


def served_nvml_driver(mountpoint: Path) -> str | None:
    """The driver version a serving mount's proc/driver/nvidia/version names, while it serves
    NVML's place (None: it does not; "": no version could be read)."""
    if not (mountpoint / NVML_PLACE).is_dir():
        return None
    try:
        text = (mountpoint / "proc/driver/nvidia/version").read_text()
    except OSError:
        return ""
    found = re.search(r"  ([0-9][0-9.]*)  ", text.split("\n", 1)[0])
    return found.group(1) if found else ""


def require_serving(mountpoint: Path) -> None:
    """Raise unless a mokkafs mount serves at ``mountpoint``."""
    stack = mounted_at(os.path.abspath(mountpoint))
    if not stack or stack[-1].fstype != FSTYPE:
        raise MountError(f"{mountpoint} is not a mokkafs mount; start `mokkafs mount` first")
    try:
        (mountpoint / "proc/devices").read_bytes()
    except OSError as exc:
        raise MountError(f"{mountpoint} does not serve ({exc.strerror})") from None


def check_parent(mountpoint: Path) -> Path:
    """The mountpoint's parent, which every container given the spec holds (for restart
    survival): it must hold nothing but the mountpoint, belong to root and be writable by root
    alone, or a container would see (and through sockets reach) whatever else is there. It is
    created, mode 0700, when missing. Raises ``CdiError`` naming the fix."""
    mnt = Path(os.path.abspath(mountpoint))
    parent = mnt.parent
    if parent == mnt or parent == Path("/"):
        raise CdiError(f"{mnt}: with --cdi-dir the mountpoint needs a parent directory of its "
                       "own, e.g. /run/mokkafs/node")
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = parent.stat()
    others = sorted(set(os.listdir(parent)) - {mnt.name})
    if others or st.st_uid != 0 or st.st_mode & 0o022:
        what = (f"it also holds {', '.join(others[:5])}" if others else
                f"it is owned by uid {st.st_uid}" if st.st_uid != 0 else
                f"it is writable by others (mode {st.st_mode & 0o777:o})")
        raise CdiError(f"{parent} cannot be given to containers: {what}. Every container "
                       f"given the spec sees this directory; mount at a path whose parent "
                       f"holds nothing else, e.g. {parent}/mokkafs/{mnt.name} (created 0700)")
    return parent
