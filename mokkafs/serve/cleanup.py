"""What ``mokkafs cleanup`` does: undo what a killed daemon left, as its record says, under
the mountpoint's lock (refused while a live daemon holds it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mokkafs.fuse.mount import refuse_link
from mokkafs.serve.owned import Owned


def cleanup(runtime_dir: Path, mountpoint: Path, spec: Path | None,
            say: Callable[[str], None]) -> None:
    """Undo what the dead daemon of ``mountpoint`` left (its CDI spec, its dead mount, the
    share over its parent), as its record in ``runtime_dir`` names them, and ``say`` each
    step. ``spec``: the CDI spec the caller expects (from ``--cdi-dir``); a record naming
    another is said. Raises ``MountError`` for a link, or while a daemon serves there."""
    refuse_link(mountpoint)
    owned = Owned.acquire(runtime_dir, mountpoint)  # refused while a daemon lives
    try:
        left = owned.left
        if left is None:
            say(f"no daemon left a record of {owned.mountpoint} in {runtime_dir}; nothing "
                "to undo")
            return
        if spec is not None and left.spec is not None and Path(left.spec.path) != spec:
            say(f"the record names the CDI spec {left.spec.path}, which is the one undone")
        for line in owned.undo(release_share=True):
            say(line)
    finally:
        owned.close()
