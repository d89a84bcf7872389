"""``mokkafs preload-env``: the environment that points libc consumers at a mount. Which
kernel paths the shim sends there is ``mokkafs.delivery.prefixes``'s.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from mokkafs.errors import MokkafsError

PACKAGE = Path(__file__).resolve().parents[1]  # where pip builds the shim


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
