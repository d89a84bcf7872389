"""What two views have in common: every static file's bytes, every link's text and every
node's type, mode and device number, walked without following links."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

# What a view makes per read or per boot, never the same between two daemons: counters
# (the InfiniBand ports' counters/ and hw_counters/, the time a function has been active)
# and the kernel log (dev/kmsg, stamped with the daemon's start). The memory the kernel's
# meminfo reports free or used right now is static in mokkafs (a function of the profile),
# so it is compared.
PER_READ = re.compile(r"/(counters|counters_ext|hw_counters)/|/power/runtime_active_time$"
                      r"|^/dev/kmsg$")
LIMIT = 1 << 20  # bytes read of a file at most: no attribute is near it


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str | int]]:
    """relative path -> (type, content): a file's bytes (the error number where reading it
    fails, as for write-only attributes), a link's text, a device's number."""
    out: dict[str, tuple[str, bytes | str | int]] = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = (f"dir {mode:o}", "")
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                out[rel] = (f"dev {mode:o}", st.st_rdev)
            elif PER_READ.search("/" + rel):
                out[rel] = (f"file {mode:o}", "per read")
            else:
                try:
                    with open(path, "rb") as f:
                        out[rel] = (f"file {mode:o}", f.read(LIMIT))
                except OSError as exc:
                    out[rel] = (f"file {mode:o}", exc.errno or 0)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return out


def differences(a: dict[str, tuple[str, bytes | str | int]],
                b: dict[str, tuple[str, bytes | str | int]]) -> list[str]:
    out = [f"only in the first: {p}" for p in sorted(a.keys() - b.keys())]
    out += [f"only in the second: {p}" for p in sorted(b.keys() - a.keys())]
    out += [f"differs: {p}" for p in sorted(a.keys() & b.keys()) if a[p] != b[p]]
    return out
