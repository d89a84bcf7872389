"""Whose a write is, and what it answers (issue 37, docs/writes.md "Who may write"): the writer's
own credentials decide, never a process that holds the same file; no write looks at other
processes' descriptors; ``driver_override`` keeps the bytes written; and the errnos a
read-only /sys, kernfs and a removed attribute give. Run in both cache modes (the suite runs
again with MOKKAFS_CACHE_MODE=keep-cache)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.fuse.test_writes import shell, write_errno
from tests.helpers.live import Live, live_mount
from tests.helpers.mounts import HOST_ATTRIBUTE, wait_for
from tests.helpers.pass_mode import PASS_MODE
from tests.helpers.profiles import H100_NIC0, device_path
from tests.helpers.tools import require_tool

PF = H100_NIC0
GPU = "0000:1b:00.0"
CAPLESS = ("--bounding-set=-sys_admin", "--inh-caps=-sys_admin")  # setpriv: root, no SYS_ADMIN


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Live]:
    with live_mount(tmp_path, "h100", extra=["--writable"]) as live:
        yield live


@contextmanager
def holding(command: list[str], user: int | None = None,
            ) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A process running ``command`` (as ``user`` if given), and the first line it printed
    (``ready``, or an errno): what it holds, it holds until this ends (it is killed)."""
    groups: list[int] | None = None if user is None else []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, user=user, group=user,
                          extra_groups=groups, cwd="/") as proc:
        try:
            assert proc.stdout is not None
            yield proc, proc.stdout.readline().strip()
        finally:
            proc.kill()


HOLD = """
import os, sys, time
try:
    fd = os.open(sys.argv[1], os.O_WRONLY)
except OSError as exc:
    print(exc.errno, flush=True)
    sys.exit(0)
print("ready", flush=True)
try:
    os.write(fd, b"1\\n")
    print(0, flush=True)
except OSError as exc:
    print(exc.errno, flush=True)
time.sleep(600)
"""


def test_a_holder_without_sys_admin_does_not_refuse_roots_write(node: Live) -> None:
    numvfs = node.mount.path / device_path(PF) / "sriov_numvfs"
    numvfs.read_text()  # no-open mode: the kernel sends no OPEN from the first one on
    with holding([require_tool("setpriv"), *CAPLESS, sys.executable, "-c", HOLD,
                  str(numvfs)]) as (holder, first):
        if PASS_MODE == "no-open":  # no OPEN: the open succeeds, its own write is refused
            assert first == "ready"
            assert holder.stdout is not None
            assert int(holder.stdout.readline()) == errno.EROFS
        else:  # keep-cache mode: its OPEN is refused
            assert int(first) == errno.EROFS
        result = shell(f"echo 2 > {numvfs}")  # root, with CAP_SYS_ADMIN, meanwhile
        assert result.returncode == 0, result.stderr
        assert numvfs.read_text() == "2\n"


def daemon_reads(live: Live) -> int:
    """Read system calls the daemon (every thread) has made so far."""
    io = Path(f"/proc/{live.mount.process.pid}/io").read_text()
    return int(next(line for line in io.splitlines() if line.startswith("syscr:")).split()[1])


FDS = """
import os, time
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(400)]
print("ready", flush=True)
time.sleep(600)
"""


def test_a_write_reads_no_other_processes_descriptors(node: Live) -> None:
    numvfs = node.mount.path / device_path(PF) / "sriov_numvfs"
    # Any local user can hold descriptors: 10 processes of nobody's, 4,000 in all.
    with ExitStack() as stack:
        # The interpreter itself: a checkout in a 0700 directory (CI's) is no path for nobody.
        python = os.path.realpath(sys.executable)
        started = [stack.enter_context(holding([python, "-I", "-c", FDS], user=65534))
                   for _ in range(10)]
        assert all(first == "ready" for _, first in started)
        numvfs.read_text()
        before = daemon_reads(node)
        assert write_errno(numvfs, b"3\n", 0) == 0
        after = daemon_reads(node)
        assert numvfs.read_text() == "3\n"
        # A scan of /proc/*/fdinfo reads each of the 4,000 at least once.
        assert after - before < 1000, after - before


def test_driver_override_keeps_the_bytes_written(node: Live) -> None:
    override = node.mount.path / device_path(GPU) / "driver_override"
    for written in (b"\xff\xfe\n", "caf\u00e9\n".encode()):
        assert write_errno(override, written, 0) == 0
        assert override.read_bytes() == written


def test_the_errnos_of_a_read_only_sys_kernfs_and_a_removed_attribute(node: Live) -> None:
    pf = node.mount.path / device_path(PF)
    host = node.mount.sys / HOST_ATTRIBUTE  # the host's, shown through: a read-only /sys
    assert host.exists()
    assert write_errno(host, b"tsc\n", 0) == errno.EROFS
    # chmod: EROFS without CAP_SYS_ADMIN, as a read-only /sys; EPERM to root (not simulated)
    chmod = shell(f"chmod 600 {pf}/sriov_numvfs", require_tool("setpriv"), *CAPLESS)
    assert chmod.returncode != 0 and "Read-only file system" in chmod.stderr, chmod.stderr
    with pytest.raises(PermissionError) as info:
        os.chmod(pf / "sriov_numvfs", 0o600)
    assert info.value.errno == errno.EPERM
    # A write through the descriptor of an attribute its function took away: ENODEV
    assert write_errno(pf / "sriov_numvfs", b"2\n", 0) == 0
    vf = node.mount.path / "sys/bus/pci/devices/0000:18:00.1"
    fd = os.open(vf / "driver_override", os.O_WRONLY)
    try:
        assert write_errno(pf / "sriov_numvfs", b"0\n", 0) == 0
        wait_for(lambda: not vf.exists(), 20, "the VF gone")  # the kernel told after
        with pytest.raises(OSError) as gone:
            os.write(fd, b"vfio-pci\n")
        assert gone.value.errno == errno.ENODEV
    finally:
        os.close(fd)
