"""Hostile input and hostile neighbours on a real mount: no update crashes the daemon, no stat
reads a file of another filesystem, a flood of metrics connections cannot starve the view,
slow clients of the metrics port cannot fail the probes or its scrapes, each network namespace
sees its own interfaces, and stopping (or being killed) leaves nothing behind that the next
daemon or ``mokkafs cleanup`` does not undo."""

from __future__ import annotations

import http.client
import os
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mokkafs.host.mountinfo import mounts_of
from mokkafs.serve import READY
from tests.helpers.live import Live, cdi_node, live_mount, profile_text, rename_over
from tests.helpers.mounts import HOST_ATTRIBUTE, REPO, free_port, mokkafs_mount, wait_for

BROKEN = [sys.executable, "-m", "tests.helpers.serve_broken"]
TWO_GPUS = """\
device_defaults: {pci: {device_id: 0x233010DE}}
devices:
  - {index: 0, pci: {bus_id: "0000:1a:00.0"}}
  - {index: 1, pci: {bus_id: "0000:1b:00.0"}}
"""


def mounted_below(path: Path) -> list[str]:
    prefix = str(path).rstrip("/")
    return [m.point for m in mounts_of() if m.point == prefix or m.point.startswith(prefix + "/")]


@pytest.mark.once  # the daemon's own life, not its answers
def test_updates_that_cannot_load_keep_the_last_view(tmp_path: Path) -> None:
    with live_mount(tmp_path, expect=["keeping generation 1"]) as live:
        _updates_that_cannot_load(live)


def _updates_that_cannot_load(live: Live) -> None:
    with open(live.profile, "ab") as f:
        f.write(b"# caf\xe9\n")  # one Latin-1 byte
    wait_for(lambda: live.metric("mokkafs_source_errors_total") == 1, 20, "the first error")
    report = live.ready()
    assert "not UTF-8 text (at offset" in str(report["last_error"])
    assert report["generation"] == 1 and report["ready"] is True
    rename_over(live, profile_text("h100").replace("MT4129", "MT99999"))  # over 0xffff
    wait_for(lambda: live.metric("mokkafs_source_errors_total") == 2, 20, "the second error")
    assert "infiniband.hca_type" in str(live.ready()["last_error"])
    assert "0000:07:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")  # still a100
    rename_over(live, profile_text("h100"))
    live.wait_generation(2)
    assert live.ready()["last_error"] is None


@pytest.mark.once  # the daemon's own life, not its answers
def test_a_surface_that_raises_while_building_keeps_the_last_view(tmp_path: Path) -> None:
    expect = [r"building generation \d+ failed", "^Traceback", "keeping generation"]
    with live_mount(tmp_path, "h100", command=BROKEN, expect=expect) as live:
        rename_over(live, profile_text("t4"))  # 4 GPUs: the broken surface raises
        stage = 'mokkafs_apply_errors_total{stage="build"}'
        wait_for(lambda: live.metric(stage) == 1, 20, "the build failure")
        report = live.ready()
        assert "ZeroDivisionError: a surface bug while building" in str(report["last_error"])
        assert report["generation"] == 1 and report["ready"] is True
        assert "0000:1b:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")  # still h100
        rename_over(live, profile_text("a100"))
        live.wait_generation(3)  # generations count loads; the second never served
        assert live.ready()["last_error"] is None
    assert "a surface bug while building" in live.mount.log_text()


@pytest.mark.once  # the daemon's own life, not its answers
def test_a_cdi_directory_that_goes_bad_while_serving(tmp_path: Path) -> None:
    expect = ("serves, but cannot write the CDI spec", "could not retract CDI spec")
    with cdi_node(tmp_path, "a100", expect=expect) as (live, spec, _):
        assert spec.exists()
        shutil.rmtree(spec.parent)
        spec.parent.write_text("a file where the CDI directory was")
        rename_over(live, profile_text("h100"))
        live.wait_generation(2)
        wait_for(lambda: live.metric('mokkafs_apply_errors_total{stage="publish"}') == 1, 20,
                 "the publish failure")
        report = live.ready()
        assert "cannot write the CDI spec" in str(report["last_error"])
        assert report["ready"] is True
        assert "0000:1b:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")
    assert not mounted_below(tmp_path / "share")  # the share over the parent is undone too


@pytest.mark.once  # the daemon's own life, not its answers
def test_a_namespace_that_copied_the_mounts_keeps_no_share(tmp_path: Path) -> None:
    """A mount namespace made while the daemon serves (a service's private namespace, a
    container made without the spec) holds a copy of the view, but not where the spec binds
    it for containers: at stop the share over the parent is undone all the same."""
    with cdi_node(tmp_path, "a100") as (live, spec, _):
        assert spec.exists() and mounted_below(tmp_path / "share")
        copy = subprocess.Popen(["unshare", "--mount", "--propagation", "private",
                                 "sleep", "300"])
        try:
            ns = f"/proc/{copy.pid}/ns/mnt"
            wait_for(lambda: os.stat(ns).st_ino != os.stat("/proc/self/ns/mnt").st_ino, 20,
                     "the copying namespace")
            assert any(str(live.mount.path) == m.point for m in mounts_of(copy.pid))
        except BaseException:
            copy.kill()
            copy.wait()
            raise
    try:
        assert not mounted_below(tmp_path / "share")  # the copy is no container
    finally:
        copy.kill()
        copy.wait()


@pytest.mark.once  # the daemon's own life, not its answers
def test_stop_during_a_build_that_never_ends(tmp_path: Path) -> None:
    """SIGTERM while the swapper builds a tree for ever: the spec is retracted, the build
    abandoned, the mount and the share over the parent undone, and the exit is clean."""
    with cdi_node(tmp_path, command=BROKEN) as (live, spec, _):
        marker = tmp_path / "building"
        rename_over(live, TWO_GPUS)
        wait_for(marker.exists, 20, "the build to start blocking")
        assert spec.exists()
    # The fixture sent SIGTERM and required a clean, unmounted exit within its wait.
    assert not spec.exists()
    assert not mounted_below(tmp_path / "share")
    log = live.mount.log_text()
    assert log.index("retracted CDI spec") < log.index("unmounted")


@pytest.mark.once  # the daemon's own life, not its answers
def test_what_a_killed_daemon_leaves_is_undone(tmp_path: Path) -> None:
    share = tmp_path / "share"
    with cdi_node(tmp_path) as (first, spec, kind):
        first.mount.process.kill()
        first.mount.process.wait()
        assert spec.exists() and mounted_below(share)  # a dead mount, a stale spec
        result = subprocess.run([sys.executable, "-m", "mokkafs", "cleanup", "--cdi-dir",
                                 str(spec.parent), "--cdi-kind", kind, str(share / "node")],
                                capture_output=True, text=True, cwd=REPO, timeout=60)
        assert result.returncode == 0, result.stderr
        assert not spec.exists() and not mounted_below(share)
        first.mount.process.returncode = 0  # killed on purpose; cleanup unmounted it
    (tmp_path / "config").rename(tmp_path / "config-1")
    with cdi_node(tmp_path) as (second, spec, kind):
        second.mount.process.kill()
        second.mount.process.wait()
        second.mount.process.returncode = 0
        (tmp_path / "config").rename(tmp_path / "config-2")
        expect = ("holds a dead FUSE mount", "left by a daemon that did not stop cleanly")
        args = ["--profile", "h100", "--cdi-dir", str(spec.parent), "--cdi-kind", kind]
        with mokkafs_mount(share / "node", args, expect=expect) as third:
            assert spec.exists()
        assert "removed " + str(spec) in third.log_text()
    assert not spec.exists() and not mounted_below(share)


NAMESPACED = r"""
set -e
mount --make-rprivate /
mount -t tracefs nodev /sys/kernel/tracing
{daemon} > {log} 2>&1 &
pid=$!
for i in $(seq 400); do grep -q "{ready}" {log} && break; sleep 0.05; done
echo "tracing: $(ls -A {mnt}/sys/kernel/tracing | wc -l) entries"
timeout 20 stat {mnt}/sys/kernel/tracing/trace_pipe 2>&1 || true
echo "cgroup: $(ls -A {mnt}/sys/fs/cgroup | wc -l) entries"
echo "kernel has: $(ls {mnt}/sys/kernel | tr '\n' ' ')"
kill -TERM $pid
wait $pid
echo "exit=$?"
"""


def test_no_file_of_another_filesystem_below_sys_is_read(tmp_path: Path) -> None:
    """tracefs's trace_pipe blocks any read for ever (and a read consumes trace events): the
    view passes through a sysfs of its own, where such mounts are the empty directories a
    container's own /sys shows. Run where tracefs is mounted, in a private namespace."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "daemon.log"
    daemon = shlex.join([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4", str(mnt)])
    script = NAMESPACED.format(daemon=daemon, log=log, mnt=mnt, ready=READY)
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                            text=True, cwd=REPO, timeout=120)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr + log.read_text()
    assert "tracing: 0 entries" in out  # the mount point, empty
    assert "No such file or directory" in out  # trace_pipe is not there to be read
    assert "cgroup: 0 entries" in out  # the host's cgroup mounts are not passed through
    assert "mm " in out and "exit=0" in out, out  # the rest of the host's sysfs is


def test_each_network_namespace_sees_its_own_interfaces(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "t4", "--runtime-dir",
                                          str(runtime)]) as mount:
        for _ in range(30):  # namespace inode numbers are reused as they die
            out = subprocess.run(["unshare", "-n", "ls", str(mount.sys / "class/net")],
                                 capture_output=True, text=True, check=True, timeout=30)
            assert out.stdout.split() == ["lo"]
        assert not mounted_below(runtime)  # instances are detached: nothing to leave behind
        mount.process.kill()
        mount.process.wait()
        assert not mounted_below(runtime)
        subprocess.run(["umount", "-l", str(mount.path)], check=True)
        mount.process.returncode = 0  # killed on purpose


@pytest.mark.once  # the daemon's own life, not its answers
def test_a_flood_of_metrics_connections_cannot_starve_the_view(tmp_path: Path) -> None:
    """1,100 idle connections with the daemon at systemd's default limit of 1,024 files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), hard))
    command = ["prlimit", "--nofile=1024:1024", sys.executable, "-m", "mokkafs", "mount"]
    flood: list[socket.socket] = []
    try:
        with live_mount(tmp_path, command=command) as live:
            port = int(live.url.rsplit(":", 1)[1])
            for _ in range(1100):
                flood.append(socket.create_connection(("127.0.0.1", port)))
            mm = live.mount.sys / "kernel/mm"
            assert sorted(os.listdir(mm)) == sorted(os.listdir("/sys/kernel/mm"))
            online = live.mount.sys / HOST_ATTRIBUTE
            assert online.read_text() == (Path("/sys") / HOST_ATTRIBUTE).read_text()
            wait_for(lambda: _healthz(port) == 200, 30, "/healthz during the flood")
            for s in flood:
                s.close()
            flood.clear()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("HEAD", "/metrics")
            response = conn.getresponse()
            assert response.status == 200 and int(response.headers["content-length"]) > 1000
            assert response.read() == b""  # headers, no body
            conn.close()
    finally:
        for s in flood:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.once  # the daemon's own life, not its answers
def test_slow_clients_of_the_metrics_port_cannot_fail_probes_or_scrapes(tmp_path: Path) -> None:
    """40 clients each send a byte of an endless request every half second to the metrics
    port, and connect again whenever it closes them. Meanwhile every probe of the probes' own
    port answers 200, the client waiting no longer than the chart's probes do (the kubelet's
    bound on the answer, kept as the socket's timeout), and so does every scrape of the
    metrics port, with the same bound."""
    from tests.helpers.helm import container, render

    probes = container(render({}))
    timeout = float(probes["livenessProbe"]["timeoutSeconds"])
    assert probes["readinessProbe"]["timeoutSeconds"] == timeout
    health = free_port()
    stop = threading.Event()
    connects: list[int] = []  # one item a connection (append is atomic)

    def slow_client(port: int) -> None:
        sock: socket.socket | None = None
        while not stop.wait(0.5):  # a byte every half second, a new connection when shed
            try:
                if sock is not None and _closed(sock):
                    sock.close()
                    sock = None
                if sock is None:
                    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                    sock.sendall(b"GET /metrics HTTP/1.1\r\nX-Slow: ")
                    connects.append(1)
                sock.sendall(b"a")
            except OSError:
                if sock is not None:
                    sock.close()
                sock = None
        if sock is not None:
            sock.close()

    with live_mount(tmp_path, extra=["--health", f"127.0.0.1:{health}"]) as live:
        port = int(live.url.rsplit(":", 1)[1])
        flood = [threading.Thread(target=slow_client, args=(port,)) for _ in range(40)]
        for thread in flood:
            thread.start()
        try:
            wait_for(lambda: len(connects) >= 40, 30, "the slow clients connected")
            answers: list[tuple[int, int, int]] = []
            # Probe while the flood goes through some rounds of the metrics port's deadline.
            while len(connects) < 3 * 40 or len(answers) < 12:
                answers.append((_healthz(health, timeout, "/healthz"),
                                _healthz(health, timeout, "/readyz"),
                                _healthz(port, timeout, "/metrics")))
                assert len(answers) < 100_000, "the flood's clients stopped reconnecting"
            assert set(answers) == {(200, 200, 200)}, answers
        finally:
            stop.set()
            for thread in flood:
                thread.join()


def _closed(sock: socket.socket) -> bool:
    """Whether the peer has closed ``sock`` (a read would return end of file)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    finally:
        sock.settimeout(5)


def _healthz(port: int, timeout: float = 2, path: str = "/healthz") -> int:
    """The status of a GET of ``path``; 0 when the connection is shed or times out."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM])
@pytest.mark.once  # the daemon's own life, not its answers
def test_repeated_stop_signals_during_shutdown(tmp_path: Path, sig: signal.Signals) -> None:
    with cdi_node(tmp_path) as (live, spec, _):
        for _ in range(20):
            live.mount.process.send_signal(sig)
        live.mount.process.wait(timeout=30)
    assert live.mount.process.returncode == 0
    assert not spec.exists() and not mounted_below(tmp_path / "share")
