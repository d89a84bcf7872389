"""Running a mokkafs daemon from tests and benchmarks (as ``trio.testing`` serves trio's users):
start ``mokkafs mount`` in a subprocess, wait until it serves, stop it by its PID, and read its
metrics; a node_exporter to scrape a view with; and the small bare pyfuse3 filesystems that
mokkafs is compared with. The test suite and bench/ use these, so there is one way to do each.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mokkafs.serve import READY


@dataclass
class Daemon:
    """A running ``mokkafs mount``: its mountpoint, process, log file and metrics address."""

    path: Path
    process: subprocess.Popen[bytes]
    log: Path
    url: str | None = None

    @property
    def sys(self) -> Path:
        return self.path / "sys"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics, by series (``name{label="value",...}``)."""
        assert self.url is not None, "started without --metrics"
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return samples(r.read().decode())

    def readyz(self) -> dict[str, object]:
        assert self.url is not None, "started without --metrics"
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=10) as r:
                report: dict[str, object] = json.loads(r.read())
        except urllib.error.HTTPError as exc:  # 503: not ready, with the same report
            report = json.loads(exc.read())
        return report


def samples(text: str) -> dict[str, float]:
    """A Prometheus exposition as {series: value}, parsed by prometheus_client (a test
    dependency, not the daemon's)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sample.labels.items())
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    """Poll ``predicate`` until it is true; TimeoutError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


@contextmanager
def daemon(mountpoint: Path, args: Sequence[str], *, log: Path,
           command: Sequence[str] | None = None, env: dict[str, str] | None = None,
           cwd: Path | None = None, ready_timeout: float = 20,
           stop_timeout: float = 10, make_mountpoint: bool = True) -> Iterator[Daemon]:
    """Run ``mokkafs mount ARGS MOUNTPOINT`` (or ``command``), logging to ``log``, until it
    serves; on exit stop it with SIGTERM (SIGKILL after ``stop_timeout``). Raises
    RuntimeError, with the log, when it exits before serving. A ``--metrics HOST:PORT`` in
    ARGS gives the daemon its ``url``. The mountpoint is made first, with its parents,
    unless ``make_mountpoint`` is false (the daemon then makes it itself)."""
    with contextlib.suppress(FileExistsError):  # also a dead mount (stat: ENOTCONN)
        if make_mountpoint:
            mountpoint.mkdir(parents=True)
    cmd = list(command) if command else [sys.executable, "-m", "mokkafs", "mount", *args,
                                          str(mountpoint)]
    url = None
    if "--metrics" in args:
        url = "http://" + args[list(args).index("--metrics") + 1]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                env={**os.environ, **(env or {})})
    running = Daemon(mountpoint, proc, log, url)
    try:
        wait_for(lambda: READY in running.log_text() or proc.poll() is not None,
                 ready_timeout, f"mount at {mountpoint}")
        if proc.poll() is not None:
            raise RuntimeError(f"mokkafs exited {proc.returncode}:\n{running.log_text()}")
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def node_exporter(exe: str, sysfs: Path, timeout: float = 20) -> Iterator[str]:
    """``exe`` (prometheus-node-exporter) with only its infiniband collector, reading
    ``sysfs``, on a loopback port of its own: its /metrics URL once it listens. Stopped by its
    PID on exit; RuntimeError, with its output, when it exits before it listens."""
    port = free_port()
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen([exe, f"--web.listen-address=127.0.0.1:{port}",
                                 f"--path.sysfs={sysfs}", "--collector.disable-defaults",
                                 "--collector.infiniband"],
                                stdout=subprocess.DEVNULL, stderr=output)
        try:
            def listening() -> bool:
                with socket.socket() as s:
                    return s.connect_ex(("127.0.0.1", port)) == 0

            wait_for(lambda: listening() or proc.poll() is not None, timeout, "node_exporter")
            if proc.poll() is not None:
                output.seek(0)
                raise RuntimeError(f"node_exporter exited {proc.returncode}:\n"
                                   f"{output.read().decode(errors='replace')}")
            yield f"http://127.0.0.1:{port}/metrics"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


SERVING = "serving"  # what a ``serve_bare`` filesystem prints once mounted


@contextmanager
def bare_fs(command: Sequence[str], mountpoint: Path, *, env: dict[str, str] | None = None,
            cwd: Path | None = None,
            stop_timeout: float = 30) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command MOUNTPOINT``, a filesystem that ``serve_bare`` serves, until it is
    mounted; on exit stop it with SIGTERM and wait for it (its return code is the test's to
    check). RuntimeError when it exits before it serves."""
    with contextlib.suppress(FileExistsError):
        mountpoint.mkdir(parents=True)
    proc = subprocess.Popen([*command, str(mountpoint)], stdout=subprocess.PIPE, cwd=cwd,
                            env={**os.environ, **env} if env else None)
    try:
        assert proc.stdout is not None
        if proc.stdout.readline() != f"{SERVING}\n".encode():
            raise RuntimeError(f"{command} did not start (exit status {proc.poll()})")
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=stop_timeout)
        if proc.stdout is not None:
            proc.stdout.close()


def serve_bare(operations: object, mountpoint: str, fsname: str) -> None:
    """Mount ``operations`` (a ``pyfuse3.Operations``) read-only at ``mountpoint`` and serve
    it until SIGTERM or SIGINT, printing ``SERVING`` once mounted: the small stand-alone
    filesystems tests and bench/ compare mokkafs with."""
    import signal as signals_

    import pyfuse3
    import trio

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pyfuse3.main)
            with trio.open_signal_receiver(signals_.SIGTERM, signals_.SIGINT) as received:
                print(SERVING, flush=True)
                async for _ in received:
                    nursery.cancel_scope.cancel()

    assert isinstance(operations, pyfuse3.Operations)
    pyfuse3.init(operations, mountpoint, set(pyfuse3.default_options) | {"ro", f"fsname={fsname}"})
    try:
        trio.run(serve)
    finally:
        pyfuse3.close(unmount=True)
