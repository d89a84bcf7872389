"""Which cache mode a mount serves in (``mokkafs.fuse.policies`` holds how each mode serves): the
variable that sets the default, whether the installed pyfuse3 carries the project's patch, and
what to do without it. pyfuse3 is imported only when a mode is chosen, so the command's help
can name the variable on a machine without FUSE."""

from __future__ import annotations

import enum
import logging
import os
import sys
from pathlib import Path

from mokkafs.errors import UsageError

log = logging.getLogger(__name__)

# The environment variable that gives ``mokkafs mount --cache-mode`` its default; read in one
# place, ``choose``.
CACHE_MODE_ENV = "MOKKAFS_CACHE_MODE"
PATCH = "pass-inode-when-no-open.patch"
WRITE_UP = "native/pyfuse3/README.md"  # the patch's write-up, and how to install it


class CacheMode(enum.Enum):
    NO_OPEN = "no-open"
    KEEP_CACHE = "keep-cache"


def pyfuse3_passes_inode() -> bool:
    """Whether the installed pyfuse3 carries the patch, as it is now: it passes the inode
    when nothing was opened, and a WRITE's context, without which no-open mode cannot tell
    who writes (it sets both markers)."""
    import pyfuse3

    return all(getattr(pyfuse3, marker, False)
               for marker in ("NO_OPEN_PASSES_INODE", "WRITE_PASSES_CONTEXT"))


def patch_help(checkout: Path | None = None, prefix: Path | None = None) -> str:
    """What to do for a pyfuse3 without the patch: follow its write-up, found beside the
    package in a checkout, else where ``pip install`` put it (``share/mokkafs/pyfuse3`` in
    the environment ``prefix``)."""
    checkout = checkout or Path(__file__).resolve().parents[2]  # beside mokkafs/
    prefix = prefix or Path(sys.prefix)
    for where in (checkout / WRITE_UP, prefix / "share/mokkafs/pyfuse3/README.md"):
        if where.is_file():
            return f"install pyfuse3 with the patch as {where} says"
    return f"install pyfuse3 with the patch as {WRITE_UP} in mokkafs's source says"


def choose(requested: str | None = None, patched: bool | None = None) -> CacheMode:
    """The mode to serve in for ``requested`` ('auto', 'no-open' or 'keep-cache'; None:
    ``$MOKKAFS_CACHE_MODE``, else auto)."""
    import pyfuse3

    if requested is None:
        requested = os.environ.get(CACHE_MODE_ENV, "auto")
    patched = pyfuse3_passes_inode() if patched is None else patched
    if requested == "auto":
        if patched:
            return CacheMode.NO_OPEN
        log.warning("pyfuse3 %s lacks the no-open patch (%s): serving in keep-cache mode, "
                    "where every open and read reaches the daemon, which makes file reads a "
                    "hundred times slower or more than in no-open mode. To serve at full "
                    "speed, %s",
                    pyfuse3.__version__, PATCH, patch_help())
        return CacheMode.KEEP_CACHE
    try:
        mode = CacheMode(requested)
    except ValueError:
        raise UsageError(f"cache mode {requested!r} is not one of auto, no-open, keep-cache "
                         f"(from --cache-mode or ${CACHE_MODE_ENV})") from None
    if mode is CacheMode.NO_OPEN and not patched:
        raise UsageError(f"cache mode no-open needs pyfuse3 built with {PATCH}; the installed "
                         f"pyfuse3 {pyfuse3.__version__} is stock: {patch_help()}, or use "
                         "--cache-mode keep-cache (every open reaches the daemon)")
    return mode
