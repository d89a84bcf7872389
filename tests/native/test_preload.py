"""The LD_PRELOAD shim: every hooked function through a C test program, real consumers with
nothing but the two exported variables, and the limit that Go/static binaries bypass it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.delivery.preload import library
from tests.helpers.mounts import REPO, Mount, mokkafs_mount
from tests.helpers.profiles import state_of
from tests.helpers.tools import require_tool

NATIVE = REPO / "native"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """native/'s own build (warnings are errors): the library and the C test program."""
    require_tool("make")
    out = tmp_path_factory.mktemp("native")
    subprocess.run(["make", "-s", "-C", str(NATIVE), f"OUT={out}"], check=True, timeout=300)
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("view")
    subprocess.run([sys.executable, "-m", "mokkafs", "render", "--profile", "h100",
                    "--node-name", "node-a", str(dest)], check=True, cwd=REPO, timeout=60)
    return dest


def where(profile: str = "h100") -> dict[str, str]:
    """What shimtest expects of the view: the first GPU's and mlx5_0's directories."""
    state = state_of(profile)
    hca = state.function(state.hcas[0].bdf)
    return {"SHIMTEST_GPU_DEVICE": f"/{state.gpus()[0].path}",
            "SHIMTEST_IB_DEVICE": f"/{hca.path}/infiniband/{state.hcas[0].name}",
            "SHIMTEST_IB_COUNT": str(len(state.hcas))}


def shimtest(built: Path, lib: Path, root: Path, mode: str, **env: str) -> str:
    result = subprocess.run([str(built / "shimtest"), mode], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "LD_PRELOAD": str(lib),
                                              "MOKKAFS_ROOT": str(root), **where(), **env})
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("which", ["installed", "make"])
def test_every_hooked_function(built: Path, rendered: Path, which: str) -> None:
    lib = library() if which == "installed" else built / "libmokkafs-preload.so"
    out = shimtest(built, lib, rendered, "on")
    assert re.search(r"^(\d+) passed, 0 failed$", out, re.M), out
    assert int(out.split()[-4]) >= 60


def test_off_switch_and_the_host_untouched(built: Path, rendered: Path) -> None:
    out = shimtest(built, library(), rendered, "off", MOKKAFS_PRELOAD="off")
    assert "0 failed" in out
    # Without MOKKAFS_PRELOAD=off the same checks see the view, so they must fail:
    broken = subprocess.run([str(built / "shimtest"), "off"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "LD_PRELOAD": str(library()),
                                              "MOKKAFS_ROOT": str(rendered), **where()})
    assert broken.returncode == 1


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    mnt = tmp_path_factory.mktemp("preload") / "mnt"
    with mokkafs_mount(mnt, ["--profile", "h100", "--node-name", "node-a"]) as mount:
        yield mount


def preload_env(mount: Mount) -> dict[str, str]:
    out = subprocess.run([sys.executable, "-m", "mokkafs", "preload-env", "--mountpoint",
                          str(mount.path)], capture_output=True, text=True, check=True,
                         cwd=REPO, timeout=60, env={k: v for k, v in os.environ.items()
                                                    if k != "LD_PRELOAD"}).stdout
    env = dict(re.findall(r"^export (\w+)=(\S+)$", out, re.M))
    assert sorted(env) == ["LD_PRELOAD", "MOKKAFS_ROOT"], out
    return env


def run_with(env: dict[str, str], *cmd: str) -> str:
    return subprocess.run(list(cmd), capture_output=True, text=True, check=True, timeout=60,
                          env={**os.environ, **env}).stdout


def test_real_consumers_see_the_node_with_two_variables(served: Mount) -> None:
    env = preload_env(served)
    state = state_of("h100", node_name="node-a")
    lspci = run_with(env, require_tool("lspci"), "-nn", "-k")
    host = subprocess.run(["lspci", "-nn"], capture_output=True, text=True).stdout
    assert lspci.count("[10de:2330]") == 8
    assert lspci.count("Kernel driver in use: nvidia") == 12
    for line in host.splitlines():  # none of the host's devices
        assert line.split(" ", 1)[1] not in lspci
    names = run_with(env, require_tool("ibstat"), "-l").split()
    assert names == sorted(h.name for h in state.hcas)  # libibumad sorts them as strings
    ports = sum(len(h.ports) for h in state.hcas)
    assert run_with(env, require_tool("ibstatus")).count("4: ACTIVE") == ports
    ibv = run_with(env, require_tool("ibv_devices"))
    assert all(f"{h.node_guid:016x}" in ibv for h in state.hcas)
    assert "235 nvidia-caps-imex-channels" in run_with(env, "cat", "/proc/devices")


def test_the_platform_and_driver_files_through_the_shim(served: Mount) -> None:
    env = preload_env(served)
    version = state_of("h100").driver.version
    assert run_with(env, "cat", "/sys/class/dmi/id/product_name") == "DGXH100\n"
    assert run_with(env, "cat", "/sys/module/nvidia_peermem/version") == f"{version}\n"
    assert f"  {version}  " in run_with(env, "cat", "/proc/driver/nvidia/version")
    info = run_with(env, "cat", "/proc/driver/nvidia/gpus/0000:1b:00.0/information")
    assert "Bus Location: \t 0000:1b:00.0\n" in info
    assert re.search(r"^nvidia \d+ \d+ nvidia_modeset,", run_with(env, "cat", "/proc/modules"),
                     re.M)
    assert run_with(env, "stat", "-c", "%F %t:%T", "/dev/infiniband/rdma_cm") == (
        "character special file a:38\n")  # 10:56 in hex
    # what the host has beside them stays the host's
    assert run_with(env, "ls", "/sys/module") == subprocess.run(
        ["ls", "/sys/module"], capture_output=True, text=True, check=True).stdout


def test_go_static_binaries_bypass_the_shim(served: Mount, ibdump: Path) -> None:
    """A documented limit, asserted so nobody claims otherwise: Go issues its own syscalls."""
    env = preload_env(served)
    result = subprocess.run([str(ibdump)], capture_output=True, text=True, timeout=60,
                            env={**os.environ, **env})
    # It read the host's /sys, which has no InfiniBand class at all: the reader's own error.
    assert result.returncode == 2, result.stdout + result.stderr
    assert "open /sys/class/infiniband: no such file or directory" in result.stderr
    assert "mlx5" not in result.stdout
    through_mount = subprocess.run([str(ibdump), str(served.sys)], capture_output=True,
                                   text=True, timeout=60, check=True)
    assert "mlx5_0" in through_mount.stdout  # the same binary sees the view through the mount


def test_dot_dot_climbs_the_kernels_namespace_never_out_of_the_mount(served: Mount) -> None:
    """``..`` in a redirected path is the kernel namespace's: climbing past ``/sys`` reaches
    the host's ``/``, never the directory the mount sits in, and links in the view are
    climbed out of physically, as the kernel does."""
    env = preload_env(served)
    beside = served.path.parent / "secret"
    beside.write_text("beside the mountpoint\n")
    try:
        # Each climbs one above "/": naively mapped, one above the mount, to the beside-file.
        for path in ("/sys/bus/pci/../../../../secret",
                     "/sys/class/infiniband/../../../../secret",
                     "/sys/bus/pci/devices/../../../../../secret",
                     "/dev/infiniband/../../../secret",
                     "/proc/driver/nvidia/../../../../secret",
                     "/sys/bus/pci/./../../..//../secret"):
            result = subprocess.run(["cat", path], capture_output=True, text=True, timeout=60,
                                    env={**os.environ, **env})
            assert result.returncode == 1 and "No such file" in result.stderr, (path, result)
            assert "beside" not in result.stdout
        # Out of the view to the host's /dev/null, as the kernel resolves it (1:3 in hex).
        assert run_with(env, "stat", "-c", "%t:%T", "/dev/infiniband/../null") == "1:3\n"
        # Back into the view from above it.
        state = state_of("h100", node_name="node-a")
        bdf = state.gpus()[0].bdf
        assert run_with(env, "cat", f"/sys/bus/pci/../../../sys/bus/pci/devices/{bdf}/vendor") \
            == "0x10de\n"
        # A link's ".." is its target's parent: the GPU's upstream port, not devices/.
        upstream = (served.path / state.gpus()[0].path).parent
        assert run_with(env, "stat", "-c", "%i", f"/sys/bus/pci/devices/{bdf}/..") \
            == f"{upstream.stat().st_ino}\n"
    finally:
        beside.unlink()
