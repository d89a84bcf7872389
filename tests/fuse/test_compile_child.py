"""Compiles in a child process, on a real mount: a change is compiled in another process
than the daemon's, and a compile that hangs is killed at its deadline, its error on /readyz,
the last good view serving, and the next change compiled by a new child; a kept child
compiles each change itself."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from tests.helpers.live import Live, live_mount, profile_text, rename_over
from tests.helpers.mounts import wait_for


def compile_pid(live: Live) -> int:
    pid = live.ready()["compile_pid"]
    assert isinstance(pid, int)
    return pid


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_change_is_compiled_in_another_process(tmp_path: Path) -> None:
    with live_mount(tmp_path) as live:
        rename_over(live, profile_text("h100"))
        live.wait_generation(2)
        pid = compile_pid(live)
        assert pid != live.mount.process.pid and parent_of(pid) == live.mount.process.pid
        assert b"mokkafs.compile_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
        os.kill(pid, signal.SIGKILL)  # one that dies while idle is replaced at the next
        wait_for(lambda: live.ready()["compile_pid"] is None, 20, "the child's end seen")
        rename_over(live, profile_text("t4"))
        live.wait_generation(3)
        assert compile_pid(live) not in (pid, live.mount.process.pid)
        assert live.ready()["last_error"] is None


def test_the_compiling_process_starts_at_a_change_and_ends_when_idle(tmp_path: Path) -> None:
    with live_mount(tmp_path, extra=["--compile-idle", "1"]) as live:
        reads = "mokkafs_source_reads_total"
        # the read after the watches are set: the bytes compiled before the mount, not again
        wait_for(lambda: live.metric(reads) >= 1, 20, "the source's first read")
        assert live.ready()["compile_pid"] is None
        live.profile.write_text(live.profile.read_text())  # the same bytes, written in place
        wait_for(lambda: live.metric(reads) >= 2, 20, "the read of the same bytes")
        assert live.ready()["compile_pid"] is None and live.generation() == 1
        rename_over(live, profile_text("h100"))
        live.wait_generation(2)
        started = live.metric("mokkafs_compile_processes_started_total")
        # ended and reaped, by the daemon (a zombie would keep its /proc entry), for being idle;
        # under load it may end before the test looks, so the log names it
        ended = re.compile(r"the compiling process (\d+) was idle 1 s; ending it")
        wait_for(lambda: ended.search(live.mount.log_text()) is not None, 30,
                 "the idle child's end")
        match = ended.search(live.mount.log_text())
        assert match is not None
        pid = int(match[1])
        wait_for(lambda: live.ready()["compile_pid"] is None
                 and not Path(f"/proc/{pid}").exists(), 30, "the idle child reaped")
        rename_over(live, profile_text("t4"))
        live.wait_generation(3)
        assert live.metric("mokkafs_compile_processes_started_total") == started + 1
        assert live.ready()["last_error"] is None


def loaded(pid: int) -> set[str]:
    """The shared objects mapped into ``pid``: a module of C (pydantic's core, libyaml's
    binding) is mapped once imported."""
    return {line.rsplit("/", 1)[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
            if line.endswith(".so") or ".so." in line}


def test_the_daemon_never_loads_the_compiler(tmp_path: Path) -> None:
    """Every compile runs in a child: the daemon maps no pydantic and no YAML parser, at
    rest or after a change (the State comes back as plain data)."""
    with live_mount(tmp_path, profile="h100") as live:
        daemon = live.mount.process.pid
        wait_for(lambda: live.metric("mokkafs_source_reads_total") >= 1, 20, "the first read")
        rename_over(live, profile_text("gb200"))
        live.wait_generation(2)
        child = compile_pid(live)
        assert any(name.startswith("_pydantic_core") for name in loaded(child))
        assert not any(name.startswith(("_pydantic_core", "_yaml")) for name in loaded(daemon))
        assert "libfuse3.so.3" in " ".join(loaded(daemon))  # what it does map is listed


def test_a_compile_that_hangs_is_killed_and_the_last_view_serves(tmp_path: Path) -> None:
    with live_mount(tmp_path, extra=["--compile-timeout", "5"],
                    expect=["keeping generation 2"]) as live:
        rename_over(live, profile_text("h100"))
        live.wait_generation(2)
        hung = compile_pid(live)
        os.kill(hung, signal.SIGSTOP)  # it takes the next request and never answers
        rename_over(live, profile_text("t4"))
        wait_for(lambda: live.ready()["last_error"] is not None, 30, "the deadline")
        report = live.ready()
        assert "took longer than 5 s: the compiling process was killed" in str(
            report["last_error"])
        assert report["generation"] == 2 and report["ready"] is True
        assert "0000:1b:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")  # h100
        assert not Path(f"/proc/{hung}").exists()  # killed and reaped
        rename_over(live, profile_text("a100"))
        live.wait_generation(3)
        assert compile_pid(live) != hung and live.ready()["last_error"] is None


def test_a_kept_compiling_process_compiles_each_change_at_once(tmp_path: Path) -> None:
    """``--compile-idle never``: the first compile's process is kept, not ended, and a later
    change is compiled by it, in the process that has the compiler imported: no process is
    started for it (the counter of starts stays at the first compile's), and the new view
    serves what the new profile says."""
    started = "mokkafs_compile_processes_started_total"
    with live_mount(tmp_path, extra=["--compile-idle", "never"]) as live:
        kept = compile_pid(live)  # the first compile's, still running once the mount serves
        assert parent_of(kept) == live.mount.process.pid and live.metric(started) == 1
        wait_for(lambda: live.metric("mokkafs_source_reads_total") >= 1, 20, "the first read")
        a100 = sorted(os.listdir(live.mount.sys / "bus/pci/devices"))
        rename_over(live, profile_text("h100"))
        live.wait_generation(2)
        assert compile_pid(live) == kept and live.metric(started) == 1
        assert sorted(os.listdir(live.mount.sys / "bus/pci/devices")) != a100
        assert live.ready()["last_error"] is None
