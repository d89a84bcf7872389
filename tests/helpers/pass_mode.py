"""The cache mode this pass of the suite serves in: scripts/test.sh runs the suite once per
mode, naming it in ``$MOKKAFS_CACHE_MODE``; without it, a daemon chooses no-open (the
set-up installs the patched pyfuse3)."""

from __future__ import annotations

import os

from mokkafs.fuse.cache_mode import CACHE_MODE_ENV

PASS_MODE = os.environ.get(CACHE_MODE_ENV, "no-open")
