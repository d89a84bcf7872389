"""What scripts/setup.sh leaves a newcomer with: a quiet install of the package (no warning
box from the build backend), the pyfuse3 release the patch targets, patched, and the CLI
reachable as the README's Use section types it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from itertools import pairwise
from pathlib import Path

from tests.helpers.mounts import REPO

PIP = [sys.executable, "-m", "pip"]
WARNING = re.compile(r"\b[A-Za-z]*Warning\b")  # BuildBackendWarning, SetuptoolsDeprecationWarning


def clean_copy(dest: Path) -> Path:
    """The repository's tracked files only, as a fresh clone (or an sdist) has them."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes((REPO / name).read_bytes())
    return dest


def test_installing_the_package_prints_no_warning_and_ships_the_hook(tmp_path: Path) -> None:
    src = clean_copy(tmp_path / "src")
    built = subprocess.run([*PIP, "wheel", "--no-deps", "-w", str(tmp_path / "wheel"), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    assert not WARNING.findall(built.stdout + built.stderr), built.stdout + built.stderr
    (wheel,) = (tmp_path / "wheel").glob("mokkafs-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "mokkafs/bin/mokkafs-hook" in names
    # what a stock pyfuse3's warning sends a pip user to (mokkafs.fuse.cache_mode.patch_help)
    data = "mokkafs-0.1.0.data/data/share/mokkafs/pyfuse3/"
    assert {data + f for f in ("README.md", "pass-inode-when-no-open.patch",
                               "build-pyfuse3.sh")} <= set(names)
    assert any(re.fullmatch(r"mokkafs/_preload\..*\.so", n) for n in names), names
    # The set-up's own way: editable, into a virtualenv (one without pip: this pip serves it)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")],
                   check=True)
    editable = subprocess.run([*PIP, "--python", str(tmp_path / "venv/bin/python"), "install",
                               "--no-deps", "-e", str(src)],
                              capture_output=True, text=True, timeout=600)
    assert editable.returncode == 0, editable.stderr
    assert not WARNING.findall(editable.stdout + editable.stderr), editable.stderr
    assert (src / "mokkafs/bin/mokkafs-hook").is_file()


def pinned_pyfuse3() -> str:
    pin: str
    (pin,) = [d for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
              ["dependencies"] if d.startswith("pyfuse3")]
    assert pin.startswith("pyfuse3=="), f"pyfuse3 must be pinned to the patched release: {pin}"
    return pin.removeprefix("pyfuse3==")


def test_pyfuse3_is_pinned_to_the_release_the_patch_targets_and_installed_patched() -> None:
    """A resolver free to pick another release would install one the patch does not fit
    (and serve every node at keep-cache speed); the set-up builds the pinned one, patched."""
    import pyfuse3

    pin = pinned_pyfuse3()
    script = (REPO / "scripts/build-pyfuse3.sh").read_text()
    assert re.search(r"^VERSION=(\S+)$", script, re.M).group(1) == pin  # type: ignore[union-attr]
    assert pyfuse3.__version__ == pin
    assert getattr(pyfuse3, "NO_OPEN_PASSES_INODE", False) is True, (
        f"{pyfuse3.__file__} lacks the patch: run scripts/setup.sh")


def listed(*args: str) -> dict[str, list[str]]:
    out = subprocess.run(["scripts/setup.sh", *args, "--list"], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return {k: v.split() for k, v in (line.split(": ", 1) for line in out.splitlines())}


def test_the_demo_sets_up_what_it_runs_and_the_tests_everything(tmp_path: Path) -> None:
    demo, tests = listed("--runtime"), listed()
    assert {"fuse3", "libfuse3-dev", "pciutils", "infiniband-diags"} <= set(demo["apt"])
    tooling = {"podman", "runc", "golang-go", "debootstrap", "prometheus-node-exporter", "make",
               "git"}  # clean_copy runs git: a bare Debian 12 has none
    assert not tooling & set(demo["apt"])
    assert set(demo["apt"]) | tooling <= set(tests["apt"])
    assert {"nvtop", "tmux"} <= set(tests["apt"]) and "apt-sources" not in demo
    assert demo["pip"][-1] == "." and tests["pip"][-1] == ".[test]"  # mypy, ruff, Helm: tests'
    # and scripts/demo.sh asks for that set-up: run it with a set-up that records its request
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts/demo.sh").write_bytes((REPO / "scripts/demo.sh").read_bytes())
    (tmp_path / "scripts/setup.sh").write_text('echo "$@" > "$(dirname "$0")/asked"; exit 7\n')
    (tmp_path / "scripts/setup.sh").chmod(0o755)
    ran = subprocess.run(["bash", str(tmp_path / "scripts/demo.sh")], capture_output=True,
                         timeout=60)
    assert ran.returncode == 7  # it stops where its set-up fails
    assert (tmp_path / "scripts/asked").read_text() == "--runtime\n"


def test_the_use_section_says_how_the_cli_is_typed_bare() -> None:
    """The README's Use section types ``mokkafs``; its first line puts the set-up's CLI on
    PATH, and does, in a shell that has nothing of this one's."""
    use = re.search(r"## Use\n\n```\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert use, "README has a Use section with a command block"
    first = use.group(1).splitlines()[0].split("#")[0].strip()
    assert first == 'export PATH="$PWD/.venv/bin:$PATH"'
    shell = subprocess.run(["bash", "-c", f"{first} && command -v mokkafs && mokkafs profiles"],
                           cwd=REPO, env={"PATH": "/usr/bin:/bin"}, capture_output=True,
                           text=True, timeout=60)
    assert shell.returncode == 0, shell.stderr
    where, *profiles = shell.stdout.splitlines()
    assert where == str(REPO / ".venv/bin/mokkafs")
    assert any(line.startswith("h100 ") for line in profiles)


def test_the_use_section_says_how_to_get_the_readers_the_demo_lacks() -> None:
    """node_exporter and lstopo come with the tests' set-up, not the demo's: the line before
    them installs their packages, which are the ones the tests' set-up installs."""
    use = re.search(r"## Use\n\n```\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert use, "README has a Use section with a command block"
    lines = [line.split("#")[0].split() for line in use.group(1).splitlines()]
    install = next(i for i, words in enumerate(lines) if words[:2] == ["apt-get", "install"])
    readers = [i for i, words in enumerate(lines)
               if {"prometheus-node-exporter", "lstopo-no-graphics"} & set(words[:2])]
    assert readers == [install + 1, install + 2]
    assert lines[install][2:] == ["prometheus-node-exporter", "hwloc-nox"]
    assert set(lines[install][2:]) <= set(listed()["apt"]) - set(listed("--runtime")["apt"])


# Stand-ins for what a first set-up runs: each notes its call in the log the set-up's stderr
# goes to (dpkg-query says nothing is installed; Python makes a .venv of stand-ins).
LOGGED = 'echo "RAN $(basename "$0") $*" >> "$SETUP_LOG"\n'
STAND_INS = {
    "bin/dpkg-query": "exit 1\n",
    "bin/apt-get": LOGGED,
    "bin/python": LOGGED + 'mkdir -p .venv/bin && for t in pip python; do\n'
                  '  cp "$0" .venv/bin/$t; done\n',
    "scripts/build-pyfuse3.sh": LOGGED,
}


def test_a_first_setup_says_what_each_long_step_does_before_it_starts(tmp_path: Path) -> None:
    """apt, the pyfuse3 build and pip take minutes on a bare machine: a "setup: " line comes
    before each of them, or the newcomer watches a silent terminal."""
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    (checkout / "native/pyfuse3").mkdir(parents=True)
    (checkout / "scripts/setup.sh").write_bytes((REPO / "scripts/setup.sh").read_bytes())
    for name, text in STAND_INS.items():
        path = tmp_path / name if name.startswith("bin/") else checkout / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"#!/bin/bash\n{text}")
        path.chmod(0o755)
    log = tmp_path / "log"
    apt = tmp_path / "etc-apt"  # a stock Debian 12's: no contrib
    (apt / "sources.list.d").mkdir(parents=True)
    with open(log, "a") as stderr:
        ran = subprocess.run(["bash", "scripts/setup.sh"], cwd=checkout, stderr=stderr,
                             stdout=subprocess.DEVNULL, timeout=60,
                             env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
                                  "PYTHON": str(tmp_path / "bin/python"),
                                  "SETUP_LOG": str(log), "APT_ETC": str(apt)})
    lines = log.read_text().splitlines()
    assert ran.returncode == 0, lines
    steps = [(before, line) for before, line in pairwise(lines)
             if line.startswith("RAN ")]
    assert [s[1].split()[1:3] for s in steps] == [
        ["apt-get", "update"], ["apt-get", "install"], ["python", "-m"], ["pip", "install"],
        ["build-pyfuse3.sh", ".venv/bin/pip"], ["build-pyfuse3.sh", ".venv/bin/pip"],
        ["pip", "install"]], lines
    unannounced = [line for before, line in steps if not before.startswith("setup: ")]
    assert not unannounced, lines
    assert "apt-get update" in steps[0][0] and "pip install -e .[test]" in steps[-1][0]
    # nvtop's component, added before the update, in a file of its own
    contrib = (apt / "sources.list.d/mokkafs-contrib.sources").read_text()
    assert "Components: contrib" in contrib and "Suites: bookworm" in contrib
    assert any("contrib" in line for line in lines[:lines.index(steps[0][1])])
