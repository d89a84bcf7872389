"""Why ``--writable`` is opt-in: on a FUSE superblock that is not read-only, the kernel marks a
file's atime stale after every READ, READDIR and READLINK the daemon answers
(``fuse_invalidate_atime``, fs/fuse/dir.c: ``if (!IS_RDONLY(inode))``), so the next ``stat``
asks the daemon again (one GETATTR). A read-only mount, the default, never pays it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.live import live_mount
from tests.helpers.metrics import fuse_requests
from tests.helpers.profiles import H100_NIC0


@pytest.mark.parametrize("writable", [False, True], ids=["read-only", "writable"])
def test_a_stat_after_a_read_asks_again_only_on_a_writable_mount(tmp_path: Path,
                                                                  writable: bool) -> None:
    with live_mount(tmp_path, "h100", extra=["--writable"] if writable else []) as live:
        fn = live.mount.path / "sys/bus/pci/devices" / H100_NIC0
        asked = []
        for name in ("vendor", "device", "class"):  # files no request has read yet
            path = fn / name
            os.stat(path)
            before = fuse_requests(live.get("/metrics")[1])
            assert path.read_bytes()
            os.stat(path)
            after = fuse_requests(live.get("/metrics")[1])
            assert after.get("read", 0) > before.get("read", 0)  # the read reached the daemon
            asked.append(after.get("getattr", 0) - before.get("getattr", 0))
        assert asked == ([1, 1, 1] if writable else [0, 0, 0])
