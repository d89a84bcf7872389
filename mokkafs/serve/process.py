"""Settings of the serving process as a whole: its log format, its file-descriptor limit, and
its heap once the first view is built."""

from __future__ import annotations

import gc
import logging
import resource

from mokkafs.host import linux


def setup_logging(debug: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO,
                        format="mokkafs: %(levelname)s %(name)s: %(message)s")


def raise_fd_limit() -> None:
    """Take the hard limit as the soft one: a busy node's callers and host reads need file
    descriptors (systemd's default soft limit is 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def settle_heap() -> None:
    """Once the first State and tree are built, before serving.

    What exists now (modules, the schema, the first State and tree) lives as long as the
    daemon, or is freed by reference counting; left to the cyclic collector, each full
    collection would walk it all (tens of milliseconds, a swap's whole budget) every few
    swaps. A swap that moves no path patches this tree, so later collections stay small."""
    gc.collect()
    gc.freeze()
    linux.release_free_heap()  # what the compile and the build used and freed (3 MiB at 256 HCAs)
