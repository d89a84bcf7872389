"""The cache policy of each cache mode, chosen once (``mokkafs.fuse.cache_mode``): the object
the handlers ask for what differs between the modes (``mokkafs.fuse.policy``)."""

from __future__ import annotations

from mokkafs.fuse.cache_mode import CacheMode
from mokkafs.fuse.invalidate import Invalidator
from mokkafs.fuse.keep_cache import KeepCache
from mokkafs.fuse.no_open import NoOpen
from mokkafs.fuse.policy import CachePolicy
from mokkafs.fuse.view import View


def cache_policy(mode: CacheMode, view: View, kernel: Invalidator | None = None) -> CachePolicy:
    """The mode's policy; ``kernel``, where no-open mode may put fresh content."""
    return NoOpen(view, kernel=kernel) if mode is CacheMode.NO_OPEN else KeepCache(view)
