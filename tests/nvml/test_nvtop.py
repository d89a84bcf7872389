"""nvtop on mokkafs's NVML (issue 39): nvtop opens ``libnvidia-ml.so`` (dlopen); given nothing
but what ``mokkafs nvml-env`` prints, in a detached tmux session of a private tmux server,
its screen shows the mounted h100 view's 8 GPUs, by index and name, each with the profile's
memory total. nvtop comes from Debian's contrib component, which scripts/setup.sh adds for
the tests only."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mokkafs.testing import wait_for
from tests.helpers.mounts import Mount
from tests.helpers.nvml import nvml_env, profile_defaults, view_gpus
from tests.helpers.tools import require_tool

SESSION = "mokkafs-nvtop"


def tmux(sock: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A command to the tmux server at ``sock`` (ours alone: never the user's)."""
    return subprocess.run([require_tool("tmux"), "-S", str(sock), *args], capture_output=True,
                          text=True, timeout=30)


def test_nvtop_shows_the_views_gpus(mount_h100: Mount, tmp_path: Path) -> None:
    nvtop = require_tool("nvtop")
    gpus = view_gpus(mount_h100.path)
    total = profile_defaults("h100")["memory"]["total_bytes"] / (1 << 30)
    devices = [f"Device {i} [{gpu.name}]" for i, gpu in enumerate(gpus)]
    memory = f"/{total:.3f}Gi]"  # nvtop's bar: "MEM[ used/total]"
    env = {**nvml_env(mount_h100.path), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    sock = tmp_path / "tmux" / "sock"
    sock.parent.mkdir()
    screen = ""

    def shows_every_gpu() -> bool:
        nonlocal screen
        screen = tmux(sock, "capture-pane", "-p", "-t", SESSION).stdout
        return all(d in screen for d in devices) and screen.count(memory) == len(gpus)

    try:
        started = tmux(sock, "new-session", "-d", "-s", SESSION, "-x", "200", "-y", "60",
                       *(f"-e{k}={v}" for k, v in env.items()), nvtop)
        assert started.returncode == 0, started.stderr
        try:
            wait_for(shows_every_gpu, 30, "nvtop to show every GPU")
        except TimeoutError as e:
            raise AssertionError(f"{e}; the screen:\n{screen}") from e
        assert len(gpus) == 8
        assert "No GPU to monitor" not in screen, screen
        killed = tmux(sock, "kill-session", "-t", SESSION)
        assert killed.returncode == 0, killed.stderr
    finally:
        tmux(sock, "kill-server")  # the server we started, by its socket; gone already is fine
