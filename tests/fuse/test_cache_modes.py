"""The two cache modes (mokkafs.fuse.policies): which one serves, what each costs in requests that
reach the daemon, that no-open mode stays exact (sizes, staleness, host entries that change),
and that a stock pyfuse3 falls back to keep-cache mode."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mokkafs import counters
from tests.helpers.clocked import clocked_mount
from tests.helpers.metrics import fuse_requests
from tests.helpers.mounts import (
    HOST_ATTRIBUTE,
    REPO,
    STOCK_PYFUSE3,
    Mount,
    free_port,
    mokkafs_mount,
    wait_for,
)
from tests.helpers.pass_mode import PASS_MODE
from tests.helpers.profiles import H100_GPU0, device_path, state_of
from tests.helpers.tools import require_tool

MODES = ("no-open", "keep-cache")
GPU = device_path(H100_GPU0)
COUNTER = "sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data"


@contextmanager
def served(tmp_path: Path, mode: str, *extra: str) -> Iterator[tuple[Mount, str]]:
    address = f"127.0.0.1:{free_port()}"
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--cache-mode", mode,
                                          "--metrics", address, *extra]) as mount:
        yield mount, f"http://{address}/metrics"


def requests(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return fuse_requests(r.read().decode())


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {op: n - before.get(op, 0) for op, n in after.items() if n != before.get(op, 0)}


def test_the_suite_runs_in_the_mode_it_was_asked_for(mount_h100: Mount) -> None:
    """scripts/test.sh runs the suite once per mode (MOKKAFS_CACHE_MODE); this proves each
    pass really served in its mode. Without the variable, the patched pyfuse3 the set-up
    builds must give the fast mode."""
    expected = PASS_MODE
    assert f"cache mode {expected}" in mount_h100.log_text()


@pytest.mark.parametrize("mode", MODES)
def test_requests_per_read_in_each_mode(tmp_path: Path, mode: str) -> None:
    """Count what reaches the daemon for warm reads, as pyfuse3's own tests do."""
    with served(tmp_path, mode, "--counter-staleness-ms", "60000") as (mount, url):
        gpu = mount.path / GPU
        files = [gpu / "vendor", gpu / "config", mount.path / COUNTER]
        for f in files:
            f.read_bytes()
        os.readlink(gpu / "driver")
        os.listdir(gpu)
        before = requests(url)
        for _ in range(5):
            for f in files:
                f.read_bytes()
            os.readlink(gpu / "driver")
            os.listdir(gpu)
        asked = delta(before, requests(url))
    if mode == "no-open":
        assert asked == {}, asked  # files, link target and listing all from the kernel
    else:
        assert asked.get("open") == 15 and asked.get("opendir") == 5, asked
        assert asked.get("readlink") == 5 * 2, asked  # driver, and class/infiniband/mlx5_0
        assert asked.get("read") == 5 * 3 * 2, asked  # every file direct_io: 1 + EOF


@pytest.mark.parametrize("mode", MODES)
def test_sizes_are_exact_where_page_caches_serve(tmp_path: Path, mode: str) -> None:
    with served(tmp_path, mode) as (mount, _):
        counter = mount.path / COUNTER
        online = mount.sys / HOST_ATTRIBUTE  # the host's, passed through
        vendor = mount.path / GPU / "vendor"
        assert os.stat(vendor).st_size == len(vendor.read_bytes()) == 7
        for f in (counter, online):
            data = f.read_bytes()
            assert data.endswith(b"\n") and b"\0" not in data
            if mode == "no-open":
                assert os.stat(f).st_size == len(data)
            else:  # read through direct_io: sized like sysfs
                assert os.stat(f).st_size == 4096


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def private_attribute(sys: Path) -> tuple[Path, bytes]:
    """A host text attribute under ``sys`` that root alone may read, found through the view,
    and what root reads of it: one shorter than the 4096 sysfs reports, so an exact length
    would show."""
    for top, _, files in os.walk(sys / "kernel/mm"):
        for name in sorted(files):
            path = Path(top, name)
            st = path.lstat()
            if st.st_uid == 0 and st.st_mode & 0o400 and not st.st_mode & 0o044:
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                if 0 < len(data) < 4096:
                    return path, data
    raise AssertionError(f"no root-only text attribute below {sys}/kernel/mm on this host")


@pytest.mark.parametrize("mode", MODES)
def test_a_host_attribute_only_root_may_read_shows_only_sysfs_size(tmp_path: Path,
                                                                   mode: str) -> None:
    """The kernel caches one size per inode for every caller: a root-only attribute's must
    be sysfs's 4096, or an unprivileged stat shows its exact length (and makes the daemon
    read it for them). Root still reads it whole, without NUL padding."""
    with served(tmp_path, mode) as (mount, url):
        path, data = private_attribute(mount.sys)
        assert b"\0" not in data
        where = os.open(mount.path, os.O_PATH | os.O_DIRECTORY)
        try:
            rel = f"/dev/fd/{where}/{path.relative_to(mount.path)}"  # past /tmp's 0700 dirs
            for _ in range(2):  # right after root read it (the kernel now holds its length)
                before = requests(url)
                size = subprocess.run([*NOBODY, "stat", "-L", "-c", "%s", rel], check=True,
                                      pass_fds=(where,), capture_output=True, text=True)
                assert size.stdout == "4096\n"
                refused = subprocess.run([*NOBODY, "cat", rel], pass_fds=(where,),
                                         capture_output=True, text=True)
                assert refused.returncode != 0 and "Permission denied" in refused.stderr
                assert "read" not in delta(before, requests(url))
                assert path.read_bytes() == data  # root's read: whole, no padding
        finally:
            os.close(where)


# A clock the test drives, and what port_xmit_data of the default 12.5 MB/s shows at each of
# its readings with a 200 ms quantum (4-byte words since the start at 1000 s):
# 1000.1 -> step 1000.0 -> 0; 1000.3 -> 1000.2 -> 625,000; 1003.71 -> 1003.6 -> 11,250,000;
# 1010.05 -> 1010.0 -> 31,250,000.
CLOCK_STEPS = ((1000.1, 0), (1000.3, 625_000), (1003.71, 11_250_000), (1010.05, 31_250_000))


@pytest.mark.parametrize("mode", MODES)
def test_counters_follow_the_daemons_clock(tmp_path: Path, mode: str) -> None:
    """Whatever the kernel caches, a reader sees exactly the value of the clock's current
    step, soon after the clock moves (no cache keeps it past its step), and never a value
    that goes back."""
    mnt = tmp_path / "mnt"
    args = ["--profile", "h100", "--cache-mode", mode, "--counter-staleness-ms", "200"]
    with clocked_mount(mnt, args, 1000.0) as clocked:
        counter = clocked.path / COUNTER
        seen: list[int] = []

        def shows(value: int) -> bool:
            seen.append(int(counter.read_text()))
            return seen[-1] == value

        for t, value in CLOCK_STEPS:
            clocked.set(t)
            wait_for(functools.partial(shows, value), 10, f"the counter at t={t}")
    assert seen == sorted(seen)  # never back
    assert set(seen) <= {v for _, v in CLOCK_STEPS}  # never a value of no step


@pytest.mark.parametrize("mode", MODES)
def test_host_entries_that_appear_are_listed(tmp_path: Path, mode: str) -> None:
    """A cached listing must not hide a new network interface: in a fresh network namespace,
    list the view's class/net, add an interface, list again."""
    require_tool("unshare")
    require_tool("ip")
    with served(tmp_path, mode) as (mount, _):
        net = mount.sys / "class/net"
        # ip link returns once the kernel has the interface: the listing right after it must
        # show it, whatever the kernel cached of the first listing.
        script = (f"ls {net}; echo --; ip link add mokka0 type dummy 2>/dev/null "
                  f"|| ip link add mokka0 type veth peer name mokka1; ls {net}; "
                  f"echo --; cat {net}/mokka0/mtu")
        out = subprocess.run(["unshare", "--net", "sh", "-ec", script], capture_output=True,
                             text=True, check=True, timeout=30).stdout
        first, second, mtu = (part.split() for part in out.split("--"))
        assert first == ["lo"]
        assert "mokka0" in second and "lo" in second
        assert mtu == ["1500"]


def test_stock_pyfuse3_falls_back_to_keep_cache(tmp_path: Path) -> None:
    assert (STOCK_PYFUSE3 / "pyfuse3").is_dir(), "run scripts/setup.sh: it installs it"
    env = {"PYTHONPATH": str(STOCK_PYFUSE3)}
    probe = subprocess.run([sys.executable, "-c", "import pyfuse3; print(pyfuse3.__file__, "
                            "hasattr(pyfuse3, 'NO_OPEN_PASSES_INODE'))"],
                           capture_output=True, text=True, check=True, env={**os.environ, **env})
    assert probe.stdout.startswith(str(STOCK_PYFUSE3)) and probe.stdout.split()[1] == "False"
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100", "--cache-mode", "auto"],
                       env=env, expect=["lacks the no-open patch"]) as mount:
        log = mount.log_text()
        assert "cache mode keep-cache" in log and "lacks the no-open patch" in log
        assert (mount.path / GPU / "vendor").read_text() == "0x10de\n"
        assert int((mount.path / COUNTER).read_text()) >= 0
    (tmp_path / "mnt2").mkdir()
    refused = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--cache-mode",
                              "no-open", str(tmp_path / "mnt2")], capture_output=True,
                             text=True, cwd=REPO, env={**os.environ, **env}, timeout=30)
    assert refused.returncode == 2
    assert "pass-inode-when-no-open.patch" in refused.stderr, refused.stderr


def test_a_port_read_in_consecutive_steps_is_kept_fresh_without_asking(tmp_path: Path) -> None:
    """No-open mode: once a port's counters are read in two consecutive steps, the daemon
    puts each later step's values into the kernel's page cache as the step begins: readers
    see every step's values and ask nothing, until the time given to a hot port ends."""
    mnt = tmp_path / "mnt"
    port = free_port()
    args = ["--profile", "h100", "--cache-mode", "no-open", "--counter-staleness-ms", "100",
            "--host-sysfs", "none", "--metrics", f"127.0.0.1:{port}"]  # no host: no merges
    url = f"http://127.0.0.1:{port}/metrics"
    traffic = state_of("h100").hcas[0].ports[0].traffic
    counter = mnt / COUNTER

    def value() -> int:
        return int(counter.read_text())

    def expect(at: float) -> int:  # the daemon started at 1000.0
        return counters.counter(traffic, "port_xmit_data",
                                  counters.elapsed(at, 1000.0, 0.1))

    with clocked_mount(mnt, args, 1000.0) as clocked:
        assert value() == 0
        clocked.set(1000.15)  # the next step: read in consecutive steps, so hot
        wait_for(lambda: value() == expect(1000.15), 10, "the entry of step 1000.0 to end")
        before = requests(url)
        for at in (1000.25, 1000.35, 1000.45, 1000.55):  # the middle of each step
            clocked.set(at)
            wait_for(functools.partial(lambda at: value() == expect(at), at), 10,
                     f"the step at {at}")
        assert delta(before, requests(url)).get("lookup", 0) == 0, delta(before, requests(url))
        clocked.set(1010.05)  # long after: the port's entry ended, so it asks again
        wait_for(lambda: value() == expect(1010.05), 10, "the hot port's entry to end")
        assert delta(before, requests(url)).get("lookup", 0) == 1, delta(before, requests(url))


def test_a_port_refreshes_in_one_request_per_step(tmp_path: Path) -> None:
    """No-open mode: reading all of a port's counters (counters/ and counters_ext/) in a new
    step costs one LOOKUP, of the port's directory (the daemon puts the step's values into the
    kernel's page cache), not a GETATTR and a READ per file; every file shows its value of
    the step."""
    mnt = tmp_path / "mnt"
    port = free_port()
    args = ["--profile", "h100", "--cache-mode", "no-open", "--counter-staleness-ms", "200",
            "--metrics", f"127.0.0.1:{port}"]
    url = f"http://127.0.0.1:{port}/metrics"
    traffic = state_of("h100").hcas[0].ports[0].traffic
    with clocked_mount(mnt, args, 1000.0) as clocked:
        port_dir = clocked.path / COUNTER.rsplit("/", 1)[0]
        files = sorted(port_dir.iterdir())
        ext = port_dir.parent / "counters_ext"  # the port's other directory: same round
        ext_files = sorted(ext.iterdir())
        assert len(files) > 20 and len(ext_files) == len(counters.COUNTERS_EXT)
        for _ in range(2):  # step 1000.0: all zero
            assert all(int(f.read_text()) == 0 for f in files + ext_files)
        clocked.set(1000.5)  # step 1000.4: 0.4 s of traffic
        before = requests(url)
        expect = {f.name: counters.counter(traffic, f.name, 0.4) for f in files}
        wait_for(lambda: int((port_dir / "port_xmit_data").read_text())
                 == expect["port_xmit_data"], 10, "the next step")
        polled = delta(before, requests(url))
        assert {f.name: int(f.read_text()) for f in files} == expect
        assert {f.name: int(f.read_text()) for f in ext_files} == {
            name: expect[mirrored] for name, mirrored in counters.COUNTERS_EXT.items()}
        asked = delta(before, requests(url))
    # A file that grew is re-sized by the kernel (one GETATTR); none is read from the daemon.
    grew = [n for n, v in expect.items() if len(str(v)) > 1]
    grew += [n for n, mirrored in counters.COUNTERS_EXT.items() if mirrored in grew]
    assert asked.get("read", 0) == 0 and asked.get("getattr", 0) <= len(grew) < len(files), asked
    # the port's directory, once per poll; nothing more once the step's values were in
    assert asked.get("lookup", 0) == polled.get("lookup", 0) >= 1, (polled, asked)


def test_a_reader_below_a_port_sees_new_counters_once_their_directory_expires(
        tmp_path: Path) -> None:
    """No-open mode: a reader that opens counters relative to ``counters/`` (a shell whose
    working directory it is, an openat descriptor) walks through no port directory, so no
    LOOKUP brings it a new step. The kernel's permission check for the search of ``counters/``
    asks for its attributes once they expire, and that GETATTR brings the port up to the step:
    the reader sees new values within the directory's timeout (shortened here to 0.5 s), not
    the files' own (minutes), with no request per file."""
    mnt = tmp_path / "mnt"
    port = free_port()
    args = ["--profile", "h100", "--cache-mode", "no-open", "--counter-staleness-ms", "200",
            "--host-sysfs", "none", "--metrics", f"127.0.0.1:{port}"]
    url = f"http://127.0.0.1:{port}/metrics"
    traffic = state_of("h100").hcas[0].ports[0].traffic
    with clocked_mount(mnt, args, 1000.0, stepped_dir_timeout=0.5) as clocked:
        dir_fd = os.open(clocked.path / COUNTER.rsplit("/", 1)[0], os.O_RDONLY | os.O_DIRECTORY)
        try:
            def value(name: str) -> int:
                fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
                try:
                    return int(os.read(fd, 64))
                finally:
                    os.close(fd)

            assert value("port_xmit_data") == value("port_rcv_data") == 0
            clocked.set(1000.5)  # step 1000.4
            before = requests(url)
            expect = counters.counter(traffic, "port_xmit_data", 0.4)
            wait_for(lambda: value("port_xmit_data") == expect, 10,
                     "counters/ to expire and bring the port's new step")
            assert value("port_rcv_data") == counters.counter(traffic, "port_rcv_data", 0.4)
            asked = delta(before, requests(url))
        finally:
            os.close(dir_fd)
    assert asked.get("lookup", 0) == 0 and asked.get("read", 0) == 0, asked
    # counters/ itself, each time it expired while polled; the two files that grew, once each
    assert 1 <= asked.get("getattr", 0) <= 2 + 10 / 0.5, asked
