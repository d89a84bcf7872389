"""Real mounts: what the kernel sees through FUSE, read by Python, cat, lspci and Go-style reads."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import stat
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from mokkafs.delivery.render import MARKER
from mokkafs.state import State
from mokkafs.tree.nodes import File
from tests.helpers.mounts import REPO, Mount, is_mounted, mokkafs_mount
from tests.helpers.profiles import (
    ALL_PROFILES,
    H100_GPU0,
    device_path,
    profile_id,
    state_of,
    tree_of,
)
from tests.helpers.tools import require_tool

PCI_IDS = Path("/usr/share/misc/pci.ids")


@cache
def pci_names() -> dict[tuple[int, int], str]:
    """(vendor, device) -> name, from the installed pci.ids that lspci also reads."""
    names: dict[tuple[int, int], str] = {}
    vendor = None
    for line in PCI_IDS.read_text(errors="replace").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if not line.startswith("\t"):
            vendor = int(line[:4], 16) if re.match(r"^[0-9a-f]{4} ", line) else None
        elif vendor is not None and not line.startswith("\t\t"):
            names[(vendor, int(line[1:5], 16))] = line[7:].strip()
    return names


def lspci(mount: Mount, *args: str) -> str:
    exe = require_tool("lspci")
    result = subprocess.run([exe, "-A", "linux-sysfs", "-O",
                             f"sysfs.path={mount.sys}/bus/pci", "-D", *args],
                            capture_output=True, text=True, timeout=60, check=True)
    return result.stdout


@pytest.mark.parametrize("profile", ALL_PROFILES, ids=profile_id)
@pytest.mark.once  # static content, which both modes serve alike (test_fuse_view_equals_render)
def test_profile_serves_exactly_its_devices(tmp_path: Path, profile: Path) -> None:
    state = state_of(profile, node_name="node-a")
    with mokkafs_mount(tmp_path / "mnt", ["--profile", str(profile),
                                          "--node-name", "node-a"]) as mount:
        listed = sorted(os.listdir(mount.sys / "bus/pci/devices"))
        assert listed == sorted(fn.bdf for fn in state.functions)
        out = lspci(mount, "-nn", "-k", "-vvv")
        blocks = {b.split(" ", 1)[0]: b for b in out.strip().split("\n\n")}
        assert sorted(blocks) == listed
        assert "!!!" not in out and "<?>" not in out  # lspci's complaints
        for fn in state.functions:
            block = blocks[fn.bdf]
            name = pci_names().get((fn.vendor, fn.device), "Device")
            assert f"{name} [{fn.vendor:04x}:{fn.device:04x}]" in block, block
            assert f"Kernel driver in use: {fn.driver}" in block
            speed = {1: "2.5", 2: "5", 3: "8", 4: "16", 5: "32", 6: "64"}[fn.link.current_gen]
            assert f"LnkSta:\tSpeed {speed}GT/s, Width x{fn.link.current_width}" in block
            assert f"NUMA node: {fn.numa_node}" in block or fn.numa_node < 0
            target = os.readlink(mount.sys / "bus/pci/devices" / fn.bdf)
            assert target == "../../../" + fn.path.removeprefix("sys/")
            assert os.path.realpath(mount.sys / "bus/pci/devices" / fn.bdf).startswith(
                f"{mount.sys}/devices/{fn.root}/")
            if fn.bridge is not None:
                primary = fn.bdf[5:7]
                assert (f"Bus: primary={primary}, secondary={fn.bridge.secondary:02x}, "
                        f"subordinate={fn.bridge.subordinate:02x}") in block, block
        ib = sorted(os.listdir(mount.sys / "class/infiniband")) if state.hcas else []
        assert ib == sorted(h.name for h in state.hcas)


def test_reads_are_exact_for_python_cat_and_go_style(mount_h100: Mount) -> None:
    state = state_of("h100")
    tree = tree_of(state)
    gpu = device_path(H100_GPU0)
    entry = tree.resolve(gpu)
    assert entry is not None
    for name, _ in entry.children:
        node = tree.resolve(f"{gpu}/{name}").node  # type: ignore[union-attr]
        if not isinstance(node, File) or node.error:
            continue
        path = mount_h100.path / gpu / name
        expected = node.read(0.0)
        assert path.read_bytes() == expected, name
        cat = subprocess.run(["cat", str(path)], capture_output=True, check=True)
        assert cat.stdout == expected, name
        fd = os.open(path, os.O_RDONLY)  # Go's os.ReadFile: one read of st_size + 1
        try:
            assert os.read(fd, os.fstat(fd).st_size + 1) == expected, name
            assert os.read(fd, 4096) == b""
        finally:
            os.close(fd)
        fd = os.open(path, os.O_RDONLY)  # procfs's SysReadFile: one read of 128 bytes
        try:
            assert os.read(fd, 128) == expected[:128]
        finally:
            os.close(fd)


def test_config_serves_any_offset(mount_h100: Mount) -> None:
    path = mount_h100.path / device_path(H100_GPU0) / "config"
    whole = path.read_bytes()
    assert len(whole) == 4096
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset, size in ((0, 4), (0x34, 1), (0x40, 60), (4090, 100), (5000, 10)):
            assert os.pread(fd, size, offset) == whole[offset:offset + size]
    finally:
        os.close(fd)


@pytest.mark.parametrize("host_sysfs", ["none", "auto"])
def test_fuse_view_equals_render(tmp_path: Path, host_sysfs: str) -> None:
    """The mount and ``mokkafs render`` give the same simulated view, file by file, link by
    link, mode by mode; with the host's sysfs merged in, the mount adds host entries only."""
    state = state_of("h100")
    dest = tmp_path / "rendered"
    subprocess.run([sys.executable, "-m", "mokkafs", "render", "--profile", "h100",
                    "--node-name", "node-a", str(dest)], check=True, cwd=REPO, timeout=60)
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--node-name", "node-a",
                                          "--host-sysfs", host_sysfs]) as mount:
        _compare_with_render(mount, dest, state, exact=host_sysfs == "none")


def _compare_with_render(mount: Mount, dest: Path, state: State, exact: bool) -> None:
    rendered = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.name != MARKER)
    if exact:
        fuse_paths = sorted(str(p.relative_to(mount.path)) for p in mount.path.rglob("*"))
        assert fuse_paths == rendered
    else:
        extra = set(os.listdir(mount.sys)) - set(os.listdir(dest / "sys"))
        assert {"fs", "block", "power"} <= extra  # the host's, passed through
        for shared in ("module", "kernel", "devices/virtual"):  # the host's beside ours
            host = set(os.listdir(Path("/sys") / shared))
            ours = set(os.listdir(dest / "sys" / shared))
            hidden = {"dmi", "iommu_groups"}  # replaced by the view's, not merged
            assert set(os.listdir(mount.sys / shared)) == (host - hidden) | ours, shared
        assert not [p for p in os.listdir(mount.sys / "devices") if p.startswith("pci")
                    and not (dest / "sys/devices" / p).exists()]  # host PCI roots hidden
        assert sorted(os.listdir(mount.sys / "bus/pci/devices")) == sorted(
            os.listdir(dest / "sys/bus/pci/devices"))
        # class/net is then the reader's own namespace's (docs/writes.md)
        rendered = [r for r in rendered if not r.startswith("sys/class/net/")]
    tree = tree_of(state)
    for rel in rendered:
        a, b = mount.path / rel, dest / rel
        sa, sb = os.lstat(a), os.lstat(b)
        assert stat.S_IFMT(sa.st_mode) == stat.S_IFMT(sb.st_mode), rel
        if stat.S_ISLNK(sa.st_mode):
            assert os.readlink(a) == os.readlink(b), rel
            continue
        assert stat.S_IMODE(sa.st_mode) == stat.S_IMODE(sb.st_mode), rel
        if stat.S_ISDIR(sa.st_mode):
            continue
        if stat.S_ISCHR(sa.st_mode):
            assert sa.st_rdev == sb.st_rdev, rel
            continue
        node = tree.resolve(rel).node  # type: ignore[union-attr]
        assert isinstance(node, File)
        if node.stream is not None:  # read record by record, waiting (tests/fuse/test_kmsg.py)
            continue
        if node.error:
            with pytest.raises(OSError) as info:
                a.read_bytes()
            assert info.value.errno == node.error
        elif node.dynamic:  # the same text but its numbers (counters, NVML's energy)
            assert re.sub(rb"\d+", b"0", a.read_bytes()) == re.sub(rb"\d+", b"0", b.read_bytes())
        else:
            assert a.read_bytes() == b.read_bytes(), rel


def test_readdir_types_and_symlinks(mount_h100: Mount) -> None:
    gpu = mount_h100.path / device_path(H100_GPU0)
    kinds = {e.name: (e.is_dir(follow_symlinks=False), e.is_symlink(),
                      e.is_file(follow_symlinks=False)) for e in os.scandir(gpu)}
    assert kinds["vendor"] == (False, False, True)
    assert kinds["driver"] == (False, True, False)
    assert os.path.realpath(gpu / "driver") == str(mount_h100.sys / "bus/pci/drivers/nvidia")
    assert os.path.realpath(mount_h100.sys / "bus/pci/devices" / H100_GPU0) == str(gpu)


def _write_errno(path: Path, flags: int) -> int:
    """Whether the open or (no-open mode: no OPEN is sent) the write refuses it."""
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        return exc.errno or 0
    try:
        os.write(fd, b"1\n")
    except OSError as exc:
        return exc.errno or 0
    finally:
        os.close(fd)
    return 0


def test_read_only_and_modes(mount_h100: Mount) -> None:
    gpu = mount_h100.path / device_path(H100_GPU0)
    for flags in (os.O_WRONLY, os.O_RDWR):  # read-only unless --writable (docs/writes.md)
        assert _write_errno(gpu / "numa_node", flags) == errno.EROFS
    with pytest.raises(OSError) as info:
        (gpu / "new").mkdir()
    assert info.value.errno == errno.EROFS
    with pytest.raises(OSError) as info:
        (gpu / "remove").read_bytes()
    assert info.value.errno == errno.EACCES
    assert stat.S_IMODE(os.stat(gpu / "remove").st_mode) == 0o220
    assert stat.S_IMODE(os.stat(gpu / "numa_node").st_mode) == 0o644
    vfs = os.statvfs(mount_h100.path)
    assert vfs.f_bsize == 4096 and vfs.f_files > 1000


def test_proc_devices_is_served(mount_h100: Mount) -> None:
    text = (mount_h100.path / "proc/devices").read_text()
    assert re.search(r"(?s)Character devices:.*\n235 nvidia-caps-imex-channels\n.*Block devices:",
                     text)
    assert "\n231 infiniband_verbs\n" in text


@pytest.mark.once  # the daemon's own life, not its answers
def test_the_daemon_maps_no_openssl(tmp_path: Path) -> None:
    """trio imports ssl, prometheus_client's exposition reads it at import, and pydantic's
    ``secrets`` loads hashlib's OpenSSL: 7 MiB of libssl and libcrypto in a daemon that
    speaks no TLS and hashes with CPython's own code. Serving and scraping leave them
    unloaded (mokkafs.host.imports, mokkafs.obs.metrics)."""
    from mokkafs.testing import free_port

    port = free_port()
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--metrics",
                                          f"127.0.0.1:{port}"]) as mount:
        assert (mount.sys / "class/infiniband/mlx5_0/ports/1/counters/port_xmit_data").read_text()
        assert mount.metrics()["mokkafs_serving"] == 1
        maps = Path(f"/proc/{mount.process.pid}/maps").read_text()
    openssl = [line for line in maps.splitlines()
               if re.search(r"/(_ssl|_hashlib)\.|/libssl|/libcrypto", line)]
    assert not openssl


def test_handler_exception_is_eio_and_the_mount_keeps_serving(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "tests.helpers.serve_broken", "--profile", "h100",
           "--node-name", "node-a", str(tmp_path / "mnt")]
    with mokkafs_mount(tmp_path / "mnt", [], command=cmd,
                       expect=[r"\w+ failed; answering EIO", "^Traceback"]) as mount:
        with pytest.raises(OSError) as info:
            (mount.path / "broken").read_bytes()
        assert info.value.errno == errno.EIO
        assert (mount.sys / "bus/pci/devices" / H100_GPU0 / "vendor").read_bytes() == b"0x10de\n"
        with pytest.raises(OSError):
            (mount.path / "broken").read_bytes()
        assert (mount.path / "proc/devices").read_text().startswith("Character devices:")
    log = mount.log_text()
    assert "ZeroDivisionError: a surface bug" in log and "answering EIO" in log


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.once  # the daemon's own life, not its answers
def test_a_stop_signal_unmounts(tmp_path: Path, sig: signal.Signals) -> None:
    mnt = tmp_path / "mnt"
    with mokkafs_mount(mnt, ["--profile", "t4"]) as mount:
        mount.process.send_signal(sig)
        mount.process.wait(timeout=30)
        assert not is_mounted(mnt)
        assert mount.process.returncode == 0


@pytest.mark.once  # the daemon's own life, not its answers
def test_signals_from_the_moment_the_mount_exists(tmp_path: Path) -> None:
    """A SIGHUP and a SIGTERM sent as soon as the mount appears (before the daemon announces
    it): neither may kill it with the mount left dead behind, and the stop may not wait on a
    readiness check no loop will answer. Both end in a clean unmount."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for attempt in range(3):
        log = tmp_path / f"daemon{attempt}.log"
        with open(log, "w") as out:
            process = subprocess.Popen([sys.executable, "-m", "mokkafs", "mount", "--profile",
                                        "t4", str(mnt)], cwd=REPO, stdout=out, stderr=out)
        try:
            while not is_mounted(mnt) and process.poll() is None:
                pass  # as soon as it is there: no sleep between
            process.send_signal(signal.SIGHUP)
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0, log.read_text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert not is_mounted(mnt), log.read_text()
        assert "received SIGTERM" in log.read_text()


@pytest.mark.once  # the daemon's own life, not its answers
def test_stale_mount_is_cleaned_up_at_start(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    with mokkafs_mount(mnt, ["--profile", "t4"]) as first:
        first.process.kill()
        first.process.wait()
        with pytest.raises(OSError) as info:
            os.listdir(mnt)
        assert info.value.errno == errno.ENOTCONN
        with mokkafs_mount(mnt, ["--profile", "t4"], expect=["holds a dead FUSE mount"]) as second:
            assert len(os.listdir(second.sys / "bus/pci/devices")) == len(
                state_of("t4").functions)
            assert "dead FUSE mount" in second.log_text()
        first.process.returncode = 0  # killed on purpose; the fixture checks the second


@pytest.mark.once  # the daemon's own life, not its answers
def test_a_metrics_address_in_use_is_exit_5_with_a_reason(tmp_path: Path) -> None:
    """Refused inside the daemon's nurseries: still its own status, no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (tmp_path / "mnt").mkdir()
        result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                                 "--metrics", f"127.0.0.1:{port}", str(tmp_path / "mnt")],
                                capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 5, result.stderr
    assert "cannot listen there" in result.stderr and "Traceback" not in result.stderr
    assert not os.path.ismount(tmp_path / "mnt")


@pytest.mark.once  # the daemon's own life, not its answers
def test_missing_and_busy_mountpoints_are_clear_errors(tmp_path: Path) -> None:
    def run(mnt: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                               str(mnt)], capture_output=True, text=True, cwd=REPO, timeout=30)

    missing = run(tmp_path / "no" / "nope")  # (a missing one in a safe parent is made)
    assert missing.returncode == 3 and "does not exist" in missing.stderr
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "t4"]):
        busy = run(tmp_path / "mnt")
        assert busy.returncode == 3 and "a live mokkafs daemon" in busy.stderr
    taken = tmp_path / "taken"
    taken.mkdir()
    subprocess.run(["mount", "--bind", str(tmp_path / "mnt"), str(taken)], check=True)
    try:
        busy = run(taken)
    finally:
        subprocess.run(["umount", str(taken)], check=True)
    assert busy.returncode == 3 and "already a mount point" in busy.stderr
