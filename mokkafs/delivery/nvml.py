"""``mokkafs nvml-env``: the environment that points NVML consumers at a mount
(docs/nvml.md). mokkafs's ``libnvidia-ml.so.1`` is built into the package's ``lib/`` at
install time; it reads the view below ``MOKKAFS_ROOT``, the variable the preload shim reads, and
makes MIG changes through the daemon's control socket named by ``MOKKAFS_CONTROL``."""

from __future__ import annotations

import os
from pathlib import Path

from mokkafs.delivery.preload import PACKAGE
from mokkafs.errors import MokkafsError

LIBRARY_DIR = PACKAGE / "lib"
SONAME = "libnvidia-ml.so.1"


def library_dir() -> Path:
    """The directory of the library built into the package."""
    if not (LIBRARY_DIR / SONAME).is_file():
        raise MokkafsError(f"mokkafs's NVML library ({LIBRARY_DIR / SONAME}) is not built; "
                           "reinstall mokkafs (pip install . compiles native/)")
    return LIBRARY_DIR


def environment(mountpoint: Path, current_library_path: str = "",
                control: Path | None = None) -> dict[str, str]:
    """``LD_LIBRARY_PATH`` with the library's directory first (the caller's after it),
    ``MOKKAFS_ROOT``, the mount, and with ``control`` ``MOKKAFS_CONTROL``, the daemon's control
    socket (without it, NVML's MIG changes answer NO_PERMISSION)."""
    lib = str(library_dir())
    paths = [lib, *(p for p in current_library_path.split(":") if p and p != lib)]
    env = {"LD_LIBRARY_PATH": ":".join(paths), "MOKKAFS_ROOT": os.path.abspath(mountpoint)}
    if control is not None:
        env["MOKKAFS_CONTROL"] = os.path.abspath(control)
    return env
