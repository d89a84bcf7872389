"""Live hot swap on a real mount: every way a profile changes, consistency under concurrent
readers, kernel caches proven by counting requests, and bad profiles while serving."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.live import Live, live_mount, profile_text, rename_over, requests
from tests.helpers.mounts import REPO, Mount, wait_for
from tests.helpers.pass_mode import PASS_MODE
from tests.helpers.profiles import H100_GPU0, device_path, read_following_links, state_of, tree_of
from tests.helpers.tools import require_tool


def write_in_place(live: Live, text: str) -> None:
    with open(live.profile, "r+") as f:
        f.truncate(0)
        f.write(text)


def configmap_swap(live: Live, text: str) -> None:
    """What the kubelet does to a ConfigMap volume: a new timestamped directory, then an
    atomic rename of the ``..data`` symlink; node.yaml links through ``..data``."""
    root = live.profile.parent
    stamp = root / f"..{time.monotonic_ns()}"
    stamp.mkdir()
    (stamp / "node.yaml").write_text(text)
    if not live.profile.is_symlink():
        live.profile.unlink()
        os.symlink("..data/node.yaml", live.profile)
    tmp = root / "..data_tmp"
    os.symlink(stamp.name, tmp)
    old = os.readlink(root / "..data") if (root / "..data").is_symlink() else None
    os.rename(tmp, root / "..data")
    if old:
        shutil.rmtree(root / old)


def sighup(live: Live, text: str) -> int:
    """A change inotify cannot see: the profile links through ``elsewhere/current``, a link in
    a directory below the profile's that mokkafs has no reason to watch, and that link is
    pointed at a new directory: only a SIGHUP makes mokkafs re-read. Returns the generation
    the SIGHUP must bring."""
    elsewhere = live.profile.parent / "elsewhere"
    current = elsewhere / "current"
    if not current.is_symlink():
        first = elsewhere / "v0"
        first.mkdir(parents=True)
        (first / "node.yaml").write_text(live.profile.read_text())
        os.symlink(first.name, current)
        reads = live.metric("mokkafs_source_reads_total")
        tmp = live.profile.with_name(".link")
        os.symlink(current / "node.yaml", tmp)
        os.rename(tmp, live.profile)
        # The link swap is seen and read (same bytes: no new generation) before the change.
        wait_for(lambda: live.metric("mokkafs_source_reads_total") > reads, 20, "the read")
    version = elsewhere / f"v{time.monotonic_ns()}"
    version.mkdir()
    (version / "node.yaml").write_text(text)
    generation = live.generation()
    reads = live.metric("mokkafs_source_reads_total")
    tmp = elsewhere / ".current"
    os.symlink(version.name, tmp)
    os.rename(tmp, current)
    live.mount.process.send_signal(signal.SIGHUP)
    wait_for(lambda: live.metric("mokkafs_source_reads_total") > reads, 20, "the re-read")
    return generation + 1


METHODS: dict[str, Callable[[Live, str], object]] = {
    "rename": rename_over, "in-place": write_in_place, "configmap": configmap_swap,
    "sighup": sighup}


def lspci_bdfs(mount: Mount) -> list[str]:
    out = subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                          f"sysfs.path={mount.sys}/bus/pci", "-D", "-n"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return sorted(line.split()[0] for line in out.splitlines())


@pytest.mark.parametrize("method", sorted(METHODS))
def test_swap_sequence(live: Live, method: str) -> None:
    change = METHODS[method]
    generation = live.generation()
    seen: dict[str, str] = {}
    for name in ("h100", "gb200", "a100"):
        before = set(os.listdir(live.mount.sys / "bus/pci/devices"))
        brought = change(live, profile_text(name))
        generation = brought if isinstance(brought, int) else generation + 1
        live.wait_generation(generation)
        state = state_of(name, node_name="node-a")
        expected = sorted(fn.bdf for fn in state.functions)
        assert sorted(os.listdir(live.mount.sys / "bus/pci/devices")) == expected
        assert lspci_bdfs(live.mount) == expected
        for gone in before - set(expected):
            with pytest.raises(OSError) as info:
                os.stat(live.mount.sys / "bus/pci/devices" / gone / "vendor")
            assert info.value.errno == errno.ENOENT
        gpu = next(fn for fn in state.functions if fn.kind == "gpu")
        vendor = live.mount.sys / "bus/pci/devices" / gpu.bdf / "device"
        assert vendor.read_text() == f"0x{gpu.device:04x}\n"
        seen[name] = vendor.read_text()
    assert len(set(seen.values())) == 3


def test_gpus_that_stay_keep_their_inode(live: Live) -> None:
    gpu = live.mount.path / device_path("0000:07:00.0", "a100")
    before = {name: os.stat(gpu / name).st_ino for name in ("vendor", "device", "numa_node")}
    text = profile_text("a100").replace(
        '  - {index: 7, uuid: GPU-a1000000-0000-4000-8000-000000000007, pci: {bus_id: '
        '"0000:bd:00.0"}}\n', "").replace(', "0000:bd:00.0"', "")
    assert text != profile_text("a100")
    rename_over(live, text)
    live.wait_generation(2)
    assert {name: os.stat(gpu / name).st_ino for name in before} == before
    assert not (live.mount.sys / "bus/pci/devices/0000:bd:00.0").exists()


def test_bad_profile_keeps_serving_and_recovers(tmp_path: Path) -> None:
    with live_mount(tmp_path, expect=["keeping generation 1"]) as live:
        _bad_profile_keeps_serving_and_recovers(live)


def _bad_profile_keeps_serving_and_recovers(live: Live) -> None:
    assert live.get("/healthz") == (200, "ok\n")
    rename_over(live, profile_text("h100") + "gpus: 8\n")
    wait_for(lambda: live.ready()["last_error"] is not None, 20, "the error on /readyz")
    report = live.ready()
    assert report["generation"] == 1 and report["ready"] is True
    assert ": a top-level key that is not a section" in str(report["last_error"])
    assert "gpus" not in str(report["last_error"])  # a key the schema lacks is not quoted
    assert str(live.profile) in str(report["last_error"])
    assert live.metric("mokkafs_source_errors_total") == 1
    assert live.get("/healthz") == (200, "ok\n")
    assert "0000:07:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")  # still a100
    rename_over(live, "devices: [\n")  # a YAML syntax error too
    wait_for(lambda: live.metric("mokkafs_source_errors_total") == 2, 20, "second error")
    assert "YAML syntax error" in str(live.ready()["last_error"])
    rename_over(live, profile_text("h100"))
    live.wait_generation(2)
    assert live.ready()["last_error"] is None
    assert "0000:1b:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")
    assert live.metric("mokkafs_swaps_total") == 1
    assert live.metric("mokkafs_generation") == 2
    assert live.get("/healthz") == (200, "ok\n")


def asked(before: dict[str, float], after: dict[str, float], *ops: str) -> float:
    return sum(after.get(op, 0) - before.get(op, 0) for op in ops)


def test_kernel_reasks_after_a_swap_and_not_without_one(live: Live) -> None:
    """In the style of pyfuse3's own tests: count the requests that reach the daemon."""
    gpu = live.mount.path / device_path("0000:07:00.0", "a100")
    changed, unchanged = gpu / "device", gpu / "numa_node"
    for path in (changed, unchanged):
        path.read_text()
    base = requests(live)
    for _ in range(3):
        os.stat(changed)
        os.stat(unchanged)
        changed.read_text()
        unchanged.read_text()
    again = requests(live)
    # keep-cache mode opens every file direct_io: each read_text is a READ and one at EOF.
    per_read = 2 if SWAP_MODE == "keep-cache" else 0
    assert asked(base, again, "lookup", "getattr") == 0  # all from the kernel's caches
    assert asked(base, again, "read") == 3 * 2 * per_read
    rename_over(live, profile_text("a100").replace("0x20B010DE", "0x20B210DE"))  # A100 80GB
    live.wait_generation(2)
    swapped = requests(live)
    assert changed.read_text() == "0x20b2\n"
    after = requests(live)
    assert asked(swapped, after, "lookup", "getattr") >= 1  # attributes were dropped
    assert asked(swapped, after, "read") == (per_read or 1)  # and the pages
    unchanged.read_text()
    os.stat(unchanged)
    last = requests(live)
    assert asked(after, last, "lookup", "getattr") == 0  # kept
    assert asked(after, last, "read") == per_read


# Whole-profile swaps under two looping readers: each one rebuilds and invalidates the whole
# view (about a second each on 2 cores); 40 give the readers thousands of reads across them.
SWAPS = 40


def test_concurrent_readers_see_whole_generations(tmp_path: Path, live: Live) -> None:
    rename_over(live, profile_text("h100"))
    live.wait_generation(2)
    trees = {"h100": tree_of(state_of("h100", node_name="node-a")),
             "h200": tree_of(state_of("h200", node_name="node-a"))}
    rels = [f"sys/bus/pci/devices/{H100_GPU0}/device",
            "sys/bus/pci/devices/0000:9d:00.0/subsystem_device",
            f"{device_path(H100_GPU0)}/config",
            "sys/class/infiniband/mlx5_0/node_guid",
            "sys/class/infiniband/mlx5_3/fw_ver",
            "sys/class/infiniband/mlx5_7/ports/1/gids/0",
            "sys/bus/pci/devices/0000:df:00.0/device"]

    expected = {rel: {name: read_following_links(tree, rel).hex()
                      for name, tree in trees.items()} for rel in rels}
    assert all(len(set(v.values())) == 2 for v in expected.values())  # every file changes
    listing = tmp_path / "paths"
    listing.write_text("".join(f"{live.mount.path / rel}\n" for rel in rels))
    stop = tmp_path / "stop"
    outs = [tmp_path / f"reader{i}.jsonl" for i in range(2)]
    readers = [subprocess.Popen([sys.executable, "-m", "tests.helpers.reader", str(listing),
                                 str(out), str(stop)], cwd=REPO) for out in outs]
    acks: list[tuple[float, float, str]] = []  # (swap started, acknowledged, profile)
    try:
        current = "h100"
        generation = 2
        for _ in range(SWAPS):
            current = "h200" if current == "h100" else "h100"
            started = time.monotonic()
            rename_over(live, profile_text(current))
            generation += 1
            acks.append((started, live.wait_generation(generation), current))
    finally:
        stop.touch()
        for r in readers:
            r.wait(timeout=30)
    reads = [json.loads(line) for out in outs for line in out.read_text().splitlines()]
    assert len(reads) > 1000
    torn = enoent = stale = 0
    for read in reads:
        rel = str(Path(read["path"]).relative_to(live.mount.path))
        if "errno" in read:
            enoent += 1
            continue
        if read["data"] not in expected[rel].values():
            torn += 1
            continue
        # The profile in force for a read that began after an acknowledgement and ended
        # before the next swap began.
        for (_, acked, name), nxt in zip(acks, [*acks[1:], (float("inf"), 0.0, "")], strict=True):
            if acked <= read["start"] and read["end"] <= nxt[0]:
                stale += read["data"] != expected[rel][name]
    assert (torn, enoent, stale) == (0, 0, 0)


def test_a_profile_that_links_into_another_directory_is_followed_there(tmp_path: Path) -> None:
    srv = tmp_path / "srv"
    with live_mount(tmp_path, target=srv / "x.yaml", expect=["keeping generation"]) as live:
        _links_into_another_directory(live, srv)


def _links_into_another_directory(live: Live, srv: Path) -> None:
    """node.yaml -> /srv/profiles/x.yaml at start: edits of x.yaml (rename-over, in place) are
    seen with no SIGHUP, and so is the link pointed at another file there, then edits of it.
    A link pointed at a third directory is refused (the last view serves), and pointed back
    into the second it is followed again."""
    (srv / ".x.yaml.swp").write_text(profile_text("h100"))
    os.rename(srv / ".x.yaml.swp", srv / "x.yaml")
    live.wait_generation(2)
    assert "0000:1b:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")
    with open(srv / "x.yaml", "r+") as f:
        f.truncate(0)
        f.write(profile_text("gb200"))
    live.wait_generation(3)
    tmp = live.profile.with_name(".link")
    (srv / "y.yaml").write_text(profile_text("a100"))
    os.symlink(srv / "y.yaml", tmp)
    os.rename(tmp, live.profile)
    live.wait_generation(4)
    (srv / "y.yaml").write_text(profile_text("h100"))
    live.wait_generation(5)
    other = live.profile.parent.parent / "other"
    other.mkdir()
    (other / "z.yaml").write_text(profile_text("a100"))
    os.symlink(other / "z.yaml", tmp)
    os.rename(tmp, live.profile)
    wait_for(lambda: live.ready()["last_error"] is not None, 20, "the refusal")
    assert f"leads to {other / 'z.yaml'}, outside the directories" in str(
        live.ready()["last_error"])
    assert live.generation() == 5
    os.symlink(srv / "x.yaml", tmp)
    os.rename(tmp, live.profile)
    live.wait_generation(6)
    assert live.ready()["following"] is True and live.ready()["last_error"] is None
    expected = sorted(fn.bdf for fn in state_of("gb200", node_name="node-a").functions)
    assert sorted(os.listdir(live.mount.sys / "bus/pci/devices")) == expected


def test_the_watch_follows_a_directory_that_is_removed_and_made_again(tmp_path: Path) -> None:
    with live_mount(tmp_path, expect=["keeping generation 1"]) as live:
        _the_watch_follows_a_directory_that_is_removed_and_made_again(live)


def _the_watch_follows_a_directory_that_is_removed_and_made_again(live: Live) -> None:
    shutil.rmtree(live.profile.parent)
    wait_for(lambda: live.ready()["last_error"] is not None, 20, "the error on /readyz")
    report = live.ready()
    assert "cannot read the profile: no such file" in str(report["last_error"])
    assert report["ready"] is True and report["following"] is True  # an ancestor is watched
    assert "0000:07:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")  # still a100
    live.profile.parent.mkdir()
    live.profile.write_text(profile_text("h100"))
    live.wait_generation(2)
    assert live.ready()["last_error"] is None
    assert "0000:1b:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")


@pytest.mark.parametrize("replacement", ["deleted", "directory", "symlink-loop"])
def test_restoring_the_same_bytes_is_seen_without_sighup(tmp_path: Path,
                                                        replacement: str) -> None:
    """The profile goes away (or becomes something unreadable), then comes back with the very
    bytes it had: the error clears and a generation is loaded, by itself."""
    with live_mount(tmp_path, expect=["keeping generation 1"]) as live:
        _restore(live, replacement)


def _restore(live: Live, replacement: str) -> None:
    text = live.profile.read_text()
    live.profile.unlink()
    if replacement == "directory":
        live.profile.mkdir()
    elif replacement == "symlink-loop":
        os.symlink(live.profile.name, live.profile)
    wait_for(lambda: live.ready()["last_error"] is not None, 20, "the error on /readyz")
    if replacement == "directory":
        live.profile.rmdir()
    elif replacement == "symlink-loop":
        live.profile.unlink()
    live.profile.write_text(text)
    live.wait_generation(2)
    assert live.ready()["last_error"] is None


# The a100's GPU 0, by its sorted name among the functions early in sys/bus/pci/devices, gone
# while the fault is in the profile and back when the profile is restored.
A100_GPU0 = "sys/bus/pci/devices/0000:07:00.0"
WITHOUT_GPU0 = "faults:\n  - {name: gone, kind: gpu-removed, target: gpu0}\n"
SWAP_MODE = PASS_MODE


def test_a_directory_held_across_its_removal_comes_back_whole(live: Live) -> None:
    """A process whose working directory is a GPU's while the GPU is removed must not keep
    the kernel from showing the directory whole when the GPU comes back (a removed
    directory reported deleted stays dead in the kernel, and it returns with the same
    inode number)."""
    gpu = Path(os.path.realpath(live.mount.path / A100_GPU0))
    names = sorted(os.listdir(gpu))
    holder = subprocess.Popen(["sleep", "600"], cwd=gpu)
    try:
        rename_over(live, profile_text("a100") + WITHOUT_GPU0)
        live.wait_generation(2)
        assert not gpu.exists()
        rename_over(live, profile_text("a100"))
        live.wait_generation(3)
        assert sorted(os.listdir(gpu)) == names
        assert (gpu / "vendor").read_text() == "0x10de\n"
    finally:
        holder.kill()
        holder.wait()


def test_a_reader_after_a_swap_gets_the_new_bytes_while_an_earlier_one_reads_on(
        tmp_path: Path) -> None:
    """keep-cache mode: the page cache is the file's, and a handle opened before the swap
    refills it with the old bytes when it reads again; one opened after must not see them."""
    old = profile_text("h100")
    new = old.replace('fw_version: "28.39.2048"', 'fw_version: "28.40.1000"')
    assert new != old
    with live_mount(tmp_path, "h100") as live:
        fw = live.mount.sys / "class/infiniband/mlx5_0/fw_ver"
        with open(fw, "rb", buffering=0) as before:
            assert before.read() == b"28.39.2048\n"
            rename_over(live, new)
            live.wait_generation(2)
            with open(fw, "rb", buffering=0) as after:
                os.pread(before.fileno(), 4096, 0)
                assert os.pread(after.fileno(), 4096, 0) == b"28.40.1000\n"
                assert fw.read_bytes() == b"28.40.1000\n"


def test_a_file_removed_under_an_open_descriptor(live: Live) -> None:
    """Read again once its pages are gone: no-open mode answers as sysfs does for a removed
    attribute (ENODEV), keep-cache mode from the descriptor's snapshot; neither logs an
    error."""
    vendor = Path(os.path.realpath(live.mount.path / A100_GPU0)) / "vendor"
    fd = os.open(vendor, os.O_RDONLY)
    try:
        assert os.pread(fd, 4096, 0) == b"0x10de\n"
        rename_over(live, profile_text("a100") + WITHOUT_GPU0)
        live.wait_generation(2)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the kernel keeps no page
        if SWAP_MODE == "no-open":
            with pytest.raises(OSError) as info:
                os.pread(fd, 4096, 0)
            assert info.value.errno == errno.ENODEV
        else:
            assert os.pread(fd, 4096, 0) == b"0x10de\n"
    finally:
        os.close(fd)
    assert "Traceback" not in live.mount.log_text()


def getdents(fd: int, size: int) -> list[str]:
    """One getdents64 call with a buffer of ``size`` bytes: the names it gave."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(size)
    n = libc.syscall(217, fd, buf, size)  # SYS_getdents64 on x86-64
    if n < 0:
        raise OSError(ctypes.get_errno(), "getdents64")
    names, at = [], 0
    while at < n:
        reclen = struct.unpack_from("H", buf.raw, at + 16)[0]
        names.append(buf.raw[at + 19:at + reclen].split(b"\0")[0].decode())
        at += reclen
    return names


def test_a_listing_read_across_a_swap_misses_and_repeats_nothing(live: Live) -> None:
    """A directory read in small getdents calls, with a swap that removes an entry between
    two of them: every name both generations hold is given once."""
    devices = live.mount.sys / "bus/pci/devices"
    before = set(os.listdir(devices))
    fd = os.open(devices, os.O_RDONLY | os.O_DIRECTORY)
    try:
        seen = getdents(fd, 512)
        assert 0 < len(seen) < len(before)
        rename_over(live, profile_text("a100") + WITHOUT_GPU0)
        live.wait_generation(2)
        while part := getdents(fd, 512):
            seen += part
    finally:
        os.close(fd)
    after = set(os.listdir(devices))
    assert "0000:07:00.0" in before - after
    assert sorted(n for n in seen if n in after) == sorted(after)
