"""The daemon and ``mokkafs cleanup`` touch only what the daemon's own record says it made,
and only once no live daemon holds it: a live daemon's spec and mount, an administrator's
binds (below --runtime-dir, or of the mountpoint's parent), a spec of another kind or at the
spec's name before the daemon started, the target of a CDI directory swapped for a link, and
a mountpoint that is a link are all left alone."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mokkafs.host.mountinfo import mounted_at
from tests.helpers.live import cdi_node, profile_text, rename_over
from tests.helpers.mounts import REPO, mokkafs_mount, wait_for

BUSY = 3  # MountError
UNSAFE = 4  # CdiError


def mokkafs(*args: str | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mokkafs", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=timeout)


@contextmanager
def bind(source: Path, target: Path) -> Iterator[None]:
    """An administrator's own bind mount, undone by the test."""
    target.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", str(target)], check=True)


def test_cleanup_against_a_live_daemon_is_refused(tmp_path: Path) -> None:
    with cdi_node(tmp_path, "t4") as (live, spec, kind):
        result = mokkafs("cleanup", "--cdi-dir", spec.parent, "--cdi-kind", kind,
                         live.mount.path)
        assert result.returncode == BUSY, result.stderr
        assert f"a live mokkafs daemon (pid {live.mount.process.pid}) serves" in result.stderr
        assert spec.exists()
        assert (live.mount.path / "proc/devices").read_text().startswith("Character devices")
        assert live.ready()["ready"] is True


def test_an_admins_bind_below_the_runtime_dir_is_left_alone(tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    admins = tmp_path / "admins"
    admins.mkdir()
    point = runtime / "admin"
    with bind(admins, point):
        args = ["--profile", "t4", "--runtime-dir", str(runtime)]
        with mokkafs_mount(tmp_path / "mnt", args) as mount:
            assert mounted_at(point)
            assert (mount.sys / "kernel").is_dir()  # the daemon's own sysfs, from its scratch
        assert mounted_at(point)
        result = mokkafs("cleanup", "--runtime-dir", runtime, tmp_path / "mnt")
        assert result.returncode == 0, result.stderr
        assert mounted_at(point)


def test_an_admins_self_bind_of_the_parent_is_left_alone(tmp_path: Path) -> None:
    share = tmp_path / "share"
    (share / "node").mkdir(parents=True, mode=0o700)
    share.chmod(0o700)
    with bind(share, share):
        with cdi_node(tmp_path, "t4") as (_, spec, kind):
            assert spec.exists()
        assert mounted_at(share)  # the daemon stopped: the administrator's bind stays
        result = mokkafs("cleanup", "--cdi-dir", spec.parent, "--cdi-kind", kind,
                         share / "node")
        assert result.returncode == 0, result.stderr
        assert mounted_at(share)


def test_specs_the_daemon_did_not_write_are_untouched(tmp_path: Path) -> None:
    cdi = tmp_path / "cdi"
    cdi.mkdir()
    other = cdi / "vendor.example_gpu.json"
    other.write_text('{"someone": "else"}\n')
    mnt = tmp_path / "share/node"
    mnt.mkdir(parents=True)
    result = mokkafs("cleanup", "--cdi-dir", cdi, "--cdi-kind", "vendor.example/gpu", mnt)
    assert result.returncode == 0, result.stderr
    assert other.read_text() == '{"someone": "else"}\n'
    taken = cdi / "mokkafs-test-taken.io_node.json"
    taken.write_text('{"not": "ours"}\n')
    result = mokkafs("mount", "--profile", "t4", "--cdi-dir", cdi, "--cdi-kind",
                     "mokkafs-test-taken.io/node", mnt)
    assert result.returncode == UNSAFE, result.stderr
    assert f"{taken} exists and is not a spec this daemon's record says it wrote" \
        in result.stderr
    assert taken.read_text() == '{"not": "ours"}\n'
    assert other.read_text() == '{"someone": "else"}\n'
    assert not mounted_at(mnt)


def test_a_cdi_directory_swapped_for_a_link_while_serving(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    expect = ("serves, but cannot write the CDI spec",)
    with cdi_node(tmp_path, "t4", expect=expect) as (live, spec, _):
        foreign = elsewhere / spec.name
        foreign.write_text("a file the daemon never wrote\n")
        moved = tmp_path / "cdi-moved"
        spec.parent.rename(moved)
        spec.parent.symlink_to(elsewhere)
        rename_over(live, profile_text("a100"))
        live.wait_generation(2)
        wait_for(lambda: live.metric('mokkafs_apply_errors_total{stage="publish"}') == 1, 20,
                 "the publish refusal")
        assert "is no longer the directory mokkafs published to" in str(
            live.ready()["last_error"])
        assert foreign.read_text() == "a file the daemon never wrote\n"
        assert (moved / spec.name).exists()
    assert foreign.read_text() == "a file the daemon never wrote\n"
    assert not (moved / spec.name).exists()  # retracted where it was published


def test_a_mountpoint_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    result = mokkafs("mount", "--profile", "t4", link, timeout=30)
    assert result.returncode == BUSY, result.stderr
    assert f"mountpoint {link} is a symbolic link" in result.stderr
    assert not mounted_at(real)
    result = mokkafs("cleanup", link)
    assert result.returncode == BUSY and "is a symbolic link" in result.stderr


def test_a_runtime_dir_others_may_write_is_refused(tmp_path: Path) -> None:
    """Others could plant the lock or the record there; nothing is mounted."""
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    runtime.chmod(0o777)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = mokkafs("mount", "--profile", "t4", "--runtime-dir", runtime, mnt, timeout=30)
    assert result.returncode == BUSY, result.stderr
    assert f"--runtime-dir {runtime}: others may write it (mode 777)" in result.stderr
    assert not mounted_at(mnt)
    assert sorted(os.listdir(runtime)) == []
