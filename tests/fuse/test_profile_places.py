"""What a profile's name may lead to, on a real mount: a link swapped to a host file that
happens to parse as YAML (``/etc/shadow`` does) quotes nothing of it on /readyz or in the log,
and a FIFO put at the profile's name is never opened (its blocked writer stays blocked)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers.live import Live, live_mount
from tests.helpers.mounts import wait_for


def shadow_like(path: Path) -> list[str]:
    """A root-only file shaped like /etc/shadow: every line a YAML key. Its key names."""
    names = [f"user{secrets.token_hex(4)}" for _ in range(3)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{n}:$6$salt{secrets.token_hex(4)}$hash:19000:0:99999:7:::\n"
                            for n in names))
    path.chmod(0o600)
    parsed = yaml.safe_load(path.read_text())
    assert isinstance(parsed, dict) and len(parsed) == 3  # it does parse, as a mapping
    return names


def point_at(live: Live, target: Path) -> None:
    tmp = live.profile.with_name(".link")
    os.symlink(target, tmp)
    os.rename(tmp, live.profile)


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_a_host_file_the_link_is_pointed_at_is_never_quoted(tmp_path: Path, where: str) -> None:
    """Outside the profile's directory it is not even opened; inside (a copy an operator
    could put there by mistake) it is read, found to be no profile, and quoted nowhere."""
    with live_mount(tmp_path, expect=["keeping generation 1"]) as live:
        shadow = (tmp_path / "etc" if where == "outside" else live.profile.parent) / "shadow"
        names = shadow_like(shadow)
        point_at(live, shadow)
        wait_for(lambda: live.metric("mokkafs_source_errors_total") == 1, 20, "the error")
        report = live.ready()
        assert report["generation"] == 1 and report["ready"] is True
        error = str(report["last_error"])
        assert ("outside the directories it was started with" if where == "outside"
                else "not a mokkafs (nvml-mock) profile") in error, error
        shown = live.get("/readyz")[1] + live.mount.log_text() + live.get("/metrics")[1]
        leaked = [n for n in names if n in shown]
        assert not leaked, (leaked, shown)
        assert "$6$" not in shown
        assert "0000:07:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")  # still a100


BLOCKED_WRITER = """\
import sys
with open(sys.argv[1], "w") as fifo:  # blocks until a reader opens the FIFO
    print("woken", flush=True)
"""
OPENAT = 257  # x86_64; /proc/PID/syscall names the call a blocked task is in


def in_openat(pid: int) -> bool:
    return Path(f"/proc/{pid}/syscall").read_text().split()[0] == str(OPENAT)


def test_a_fifo_at_the_profiles_name_is_not_opened(tmp_path: Path) -> None:
    with live_mount(tmp_path, expect=["keeping generation 1"]) as live:
        fifo = live.profile.with_name(".fifo")
        os.mkfifo(fifo)
        writer = subprocess.Popen([sys.executable, "-c", BLOCKED_WRITER, str(fifo)],
                                  stdout=subprocess.PIPE)
        try:
            wait_for(lambda: in_openat(writer.pid), 20, "the writer to block in open")
            os.rename(fifo, live.profile)
            wait_for(lambda: live.metric("mokkafs_source_errors_total") == 1, 20, "the error")
            assert writer.poll() is None and in_openat(writer.pid)  # still blocked
            assert "a FIFO, not a regular file" in str(live.ready()["last_error"])
            assert "0000:07:00.0" in os.listdir(live.mount.sys / "bus/pci/devices")
        finally:
            release = os.open(live.profile, os.O_RDONLY | os.O_NONBLOCK)  # wakes it at last
            try:
                assert writer.communicate(timeout=20)[0] == b"woken\n"
            finally:
                os.close(release)
