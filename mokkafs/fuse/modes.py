"""How the kernel caches the view: two cache modes, and the choice between them.

- ``no-open``: ``open`` and ``opendir`` answer ENOSYS, so the kernel stops sending OPEN,
  RELEASE, OPENDIR and RELEASEDIR for the connection, keeps every file's pages and every
  directory's listing in its caches, and (with FUSE_CAP_CACHE_SYMLINKS) every link's target.
  Steady-state reads never reach the daemon. Freshness rests on attributes alone: exact sizes,
  an mtime that changes when content changes (the kernel's auto_inval_data drops pages then),
  attribute timeouts no longer than a content's allowed staleness, and invalidation on swaps.
  Stock pyfuse3 cannot serve it: its read and readdir get the file handle, which is 0 in this
  mode. ``native/pyfuse3/pass-inode-when-no-open.patch`` makes them get the inode.
- ``keep-cache``: every open reaches the daemon, which takes a per-open snapshot and answers
  ``keep_cache`` for static files and ``direct_io`` for dynamic ones. Works with any pyfuse3.
"""

from __future__ import annotations

import enum
import logging

import pyfuse3

from mokkafs.errors import MountError

log = logging.getLogger(__name__)

ENV = "MOKKAFS_CACHE_MODE"  # the default of ``mokkafs mount --cache-mode``
PATCH = "native/pyfuse3/pass-inode-when-no-open.patch"


class CacheMode(enum.Enum):
    NO_OPEN = "no-open"
    KEEP_CACHE = "keep-cache"


def pyfuse3_passes_inode() -> bool:
    """Whether the installed pyfuse3 carries the patch (it sets this marker)."""
    return bool(getattr(pyfuse3, "NO_OPEN_PASSES_INODE", False))


def choose(requested: str, patched: bool | None = None) -> CacheMode:
    """The mode to serve in for ``requested`` ('auto', 'no-open' or 'keep-cache')."""
    patched = pyfuse3_passes_inode() if patched is None else patched
    if requested == "auto":
        if patched:
            return CacheMode.NO_OPEN
        log.warning("pyfuse3 %s lacks the no-open patch (%s); serving in keep-cache mode, "
                    "where every open reaches the daemon. scripts/build-pyfuse3.sh installs "
                    "the patched build", pyfuse3.__version__, PATCH)
        return CacheMode.KEEP_CACHE
    try:
        mode = CacheMode(requested)
    except ValueError:
        raise MountError(f"cache mode {requested!r} is not one of auto, no-open, keep-cache "
                         f"(from --cache-mode or ${ENV})") from None
    if mode is CacheMode.NO_OPEN and not patched:
        raise MountError(f"cache mode no-open needs pyfuse3 built with {PATCH} "
                         f"(scripts/build-pyfuse3.sh); the installed pyfuse3 "
                         f"{pyfuse3.__version__} is stock: use --cache-mode auto or keep-cache")
    return mode
