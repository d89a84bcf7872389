"""The README's two commands, run as written (the test command is running this very test);
lines of its Use block as typed, and its exit statuses as the commands define them."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from mokkafs.errors import EXIT_STATUSES
from tests.helpers.mounts import REPO, Mount, is_mounted, mokkafs_mount, wait_for


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S)
    assert block, "README has a ```sh block with the set-up commands"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_readme_has_exactly_two_setup_commands() -> None:
    assert readme_commands() == ["scripts/demo.sh", "scripts/test.sh"]


def test_the_quick_tier_is_a_sentence_under_the_two_commands() -> None:
    """``scripts/test.sh --quick`` (tests/e2e/test_suite.py runs it) is named in the set-up
    section's prose, not as a third command."""
    section = (REPO / "README.md").read_text().split("## Set up and run")[1].split("\n## ")[0]
    assert "`scripts/test.sh --quick`" in section.split("```")[2]


def test_ci_runs_the_readme_test_command(tmp_path: Path) -> None:
    """Run .ci/run in a copy whose scripts/test.sh records that it ran, and with what."""
    (tmp_path / ".ci").mkdir()
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / ".ci/run", tmp_path / ".ci/run")
    (tmp_path / "scripts/test.sh").write_text(
        'echo "ran with $# arguments" > "$(dirname "$0")/ran"\n')
    result = subprocess.run(["bash", str(tmp_path / ".ci/run")], capture_output=True,
                            text=True, timeout=60, cwd="/")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "scripts/ran").read_text() == "ran with 0 arguments\n"


def test_demo_mounts_shows_lspci_and_unmounts_on_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "demo.out"
    with open(out, "wb") as f:
        # A terminal's Ctrl-C reaches the whole foreground process group: run the demo in a
        # group of its own and signal that group.
        proc = subprocess.Popen(["scripts/demo.sh"], cwd=REPO, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: "Press Ctrl-C" in out.read_text() or proc.poll() is not None, 120,
                 "the demo to serve")
        text = out.read_text()
        mnt = Path(re.search(r"serves h100 at (\S+) ", text).group(1))  # type: ignore[union-attr]
        assert is_mounted(mnt)
        assert "3D controller [0302]: NVIDIA Corporation GH100[H100 SXM5 80GB] [10de:2330]" in text
        assert text.count("Kernel driver in use: nvidia") == 12  # 8 GPUs, 4 NVSwitches
        assert "mlx5_7" in text and "state:\t\t 4: ACTIVE" in text
        assert "235 nvidia-caps-imex-channels" in text
        assert "-[17-1b]--+-00.0-[18]----00.0  Mellanox" in text  # the switch tree
        assert "product_name: DGXH100\n" in text
        assert "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.163.01  " in text
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=10) == 0
        assert not is_mounted(mnt)
        assert not mnt.exists()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def use_line(start: str) -> str:
    """The line of README's Use block that starts with ``start``, without its comment."""
    block = re.search(r"## Use\n\n```\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block, "README has a Use block"
    lines = [line.split("  #")[0].strip() for line in block.group(1).splitlines()]
    found = [line for line in lines if line.startswith(start)]
    assert found, f"README's Use block has no line starting {start!r}"
    return found[0]


def test_the_readmes_first_mount_works_as_typed(tmp_path: Path) -> None:
    """``mokkafs mount --profile h100 /run/mokkafs`` on a node where /run/mokkafs does not
    exist yet; a fresh directory like /run (root's, 0755) stands in for /run."""
    line = use_line("mokkafs mount --profile h100 /run/mokkafs")
    run = tmp_path / "run"
    run.mkdir(mode=0o755)
    args = shlex.split(line.replace("/run/", f"{run}/"))[2:]
    mnt = Path(args.pop())
    with mokkafs_mount(mnt, args, make_mountpoint=False) as mount:
        assert (mount.sys / "class/dmi/id/product_name").read_text() == "DGXH100\n"
    assert not mnt.exists()


def test_what_lspci_says_on_stderr_is_explained(mount_h100: Mount) -> None:
    line = use_line("lspci ")
    done = subprocess.run(shlex.split(line.replace("/run/mokkafs", str(mount_h100.path))),
                          capture_output=True, text=True, timeout=60, check=True)
    assert "Kernel driver in use: nvidia" in done.stdout
    readme = (REPO / "README.md").read_text()
    for said in done.stderr.splitlines():
        what = said.split(": ")[1] if ": " in said else said  # lspci: WHAT: error -2
        assert what in readme, f"README does not explain lspci's {said!r}"


def test_the_readmes_exit_statuses_are_the_commands(tmp_path: Path) -> None:
    text = (REPO / "README.md").read_text().split("### Exit status", 1)[1]
    table = re.findall(r"^\| (\d+) \|", text.split("\n\n", 2)[1], re.M)
    assert [int(s) for s in table] == list(EXIT_STATUSES)
