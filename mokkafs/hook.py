"""``mokkafs-hook``: an OCI createContainer hook that binds a host file over a path inside the
container, where the runtime itself will not mount (runc refuses anything inside /proc).

Usage (from a CDI spec): ``mokkafs-hook bind HOSTFILE CONTAINERPATH``, with the OCI state JSON
on standard input. The hook runs in the container's mount namespace before pivot_root, so it
binds onto ``<rootfs>/CONTAINERPATH`` and makes that bind read-only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sys
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND = 1, 2, 4, 32, 4096
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def _mount(source: str, target: str, flags: int) -> None:
    if _libc.mount(os.fsencode(source), os.fsencode(target), None, flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def rootfs(state: dict[str, object]) -> Path:
    bundle = Path(str(state["bundle"]))
    config = json.loads((bundle / "config.json").read_text())
    root = Path(config["root"]["path"])
    return root if root.is_absolute() else bundle / root


def bind(host_file: str, container_path: str, root: Path) -> None:
    target = os.path.realpath(root / container_path.lstrip("/"))
    if os.path.commonpath([target, os.path.realpath(root)]) != os.path.realpath(root):
        raise ValueError(f"{container_path} resolves outside the container's root")
    _mount(host_file, target, MS_BIND)
    _mount(host_file, target, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "bind":
        print("usage: mokkafs-hook bind HOSTFILE CONTAINERPATH  (OCI state on stdin)",
              file=sys.stderr)
        return 2
    try:
        bind(args[1], args[2], rootfs(json.load(sys.stdin)))
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        print(f"mokkafs-hook: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
