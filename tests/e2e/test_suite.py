"""The suite's own machinery: the guards around every test (tests/helpers/guards.py) and
which pass of scripts/test.sh runs a test (tests/helpers/passes.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from mokkafs.host.mountinfo import parse
from tests.helpers.guards import changed_host_mounts, under
from tests.helpers.mounts import REPO
from tests.helpers.passes import ONCE
from tests.helpers.workers import made_once

# One mountinfo, the host's cgroup2 and two pytest-xdist workers' mounts under one run's base.
RUN = "/tmp/pytest-of-root/pytest-7"
MOUNTINFO = f"""\
22 1 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
41 22 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
90 1 0:50 / {RUN}/popen-gw0/test_a0/mnt rw,nosuid,nodev - fuse.mokkafs mokkafs rw
91 1 0:51 / {RUN}/popen-gw1/test_b0/mnt rw,nosuid,nodev - fuse.mokkafs mokkafs rw
"""


def test_a_worker_sees_only_its_own_mounts_left_behind() -> None:
    """Under pytest-xdist another worker's test holds mounts while this one ends: they are
    below another base directory, and not this test's."""
    entries = parse(MOUNTINFO)
    assert under(Path(f"{RUN}/popen-gw0"), entries) == {f"{RUN}/popen-gw0/test_a0/mnt"}
    assert under(Path(RUN), entries) == {f"{RUN}/popen-gw0/test_a0/mnt",
                                         f"{RUN}/popen-gw1/test_b0/mnt"}


def test_a_host_mount_whose_options_changed_is_named() -> None:
    """What a booting systemd in the host's cgroup namespace did: the host's cgroup2 gained
    nsdelegate. Mounts that come and go (a test's, another worker's) are not the host's."""
    before = parse(MOUNTINFO)
    after = parse(MOUNTINFO.replace("cgroup2 cgroup2 rw", "cgroup2 cgroup2 rw,nsdelegate")
                  .replace(f"91 1 0:51 / {RUN}/popen-gw1/test_b0/mnt", "92 1 0:52 / /tmp/x"))
    assert changed_host_mounts(before, after) == [
        "/sys/fs/cgroup/unified: rw,relatime rw -> rw,relatime rw,nsdelegate"]
    assert changed_host_mounts(before, before) == []


# A stand-in for .venv/bin/python -m pytest: it notes each run (the cache mode and the
# arguments) and ends as $FAKE_<MODE> says: "RC CLOSING-LINE". The bytecode step before the
# passes (python -m compileall) is noted apart.
FAKE_PYTEST = """#!/bin/bash
if [ "$1 $2" = "-m compileall" ]; then echo "$*" >> "$(dirname "$0")/../../compiled"; exit 0; fi
mode=${MOKKAFS_CACHE_MODE:-default}
echo "$mode $*" >> "$(dirname "$0")/../../runs"
var=FAKE_${mode//-/_}
read -r rc closing <<< "${!var}"
echo "$closing"
exit "$rc"
"""


def fake_checkout(tmp_path: Path) -> Path:
    """scripts/test.sh in a copy whose set-up, ruff, mypy and pytest are stand-ins."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / ".venv/bin").mkdir(parents=True)
    shutil.copy(REPO / "scripts/test.sh", tmp_path / "scripts/test.sh")
    for path, text in {"scripts/setup.sh": "exit 0\n", ".venv/bin/ruff": "exit 0\n",
                       ".venv/bin/mypy": "exit ${FAKE_MYPY:-0}\n",
                       ".venv/bin/python": FAKE_PYTEST}.items():
        (tmp_path / path).write_text(text)
        (tmp_path / path).chmod(0o755)
    return tmp_path


def run_suite(checkout: Path, *args: str, **fake: str) -> tuple[int, list[str], list[str]]:
    """scripts/test.sh ARGS with the stand-ins told how to end: its exit status, its output's
    lines, and the pytest runs it made."""
    ran = subprocess.run(["bash", str(checkout / "scripts/test.sh"), *args],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ["PATH"], **fake})
    runs = checkout / "runs"
    return (ran.returncode, ran.stdout.splitlines(),
            runs.read_text().splitlines() if runs.exists() else [])


def test_both_passes_run_when_the_first_fails_and_the_summary_says_so(tmp_path: Path) -> None:
    status, out, runs = run_suite(
        fake_checkout(tmp_path),
        FAKE_default="1 ==== 1 failed, 700 passed in 300.00s ====",
        FAKE_keep_cache="0 ==== 400 passed, 301 deselected in 200.00s ====")
    assert status == 1
    assert [r.split()[0] for r in runs] == ["default", "keep-cache"]
    assert "--mode-dependent-only" in runs[1].split()
    assert "==== 1 failed, 700 passed in 300.00s ====" in out  # pytest's own, for each pass
    summary = out[out.index("test: summary"):]
    pass1, pass2 = (next(line for line in summary if f"pass {n} of 2" in line) for n in (1, 2))
    assert "FAILED (exit 1)" in pass1 and "1 failed, 700 passed" in pass1
    assert " ok " in pass2 and "400 passed" in pass2
    assert out[-1] == "test: 1100 passed, 1 failed"


def test_a_pass_that_ran_no_test_failed(tmp_path: Path) -> None:
    """pytest's exit 5 (no test ran) fails the run: CI would land a suite that tests nothing.
    Only tests chosen by hand may leave pass 2 nothing to run (they are all cache-mode-free)."""
    checkout = fake_checkout(tmp_path)
    ends = {"FAKE_default": "0 ==== 5 passed in 1.00s ====",
            "FAKE_keep_cache": "5 ==== 5 deselected in 1.00s ===="}
    status, out, _ = run_suite(checkout, **ends)
    assert status == 1
    assert "FAILED: no test ran (exit 5)" in next(line for line in out if "pass 2 of 2" in line)
    status, out, _ = run_suite(checkout, "tests/unit", **ends)
    assert status == 0, out
    assert out[-1] == "test: 5 passed, 0 failed"


def test_quick_runs_lint_types_and_unit_tests_once(tmp_path: Path) -> None:
    status, out, runs = run_suite(fake_checkout(tmp_path), "--quick", "-k", "tree",
                                  FAKE_default="0 ==== 9 passed in 1.00s ====", FAKE_MYPY="1")
    assert len(runs) == 1
    assert runs[0].split()[0] == "default"
    assert runs[0].split()[-3:] == ["tests/unit", "-k", "tree"]
    assert status == 1  # mypy failed, and the tests ran all the same
    # the package's bytecode is made before any pass, the quick one too
    assert (tmp_path / "compiled").read_text().split() == [
        "-m", "compileall", "-q", "mokkafs", "tests", "bench"]
    assert any(line.startswith("test:   mypy") and "FAILED (exit 1)" in line for line in out)


def test_a_long_test_is_not_dumped_as_a_hang_before_its_limit() -> None:
    """pytest-timeout dumps every thread's stack when a test reaches its limit (300 s, or a
    test's own @pytest.mark.timeout); faulthandler_timeout would dump them earlier, in the
    middle of a test that is only slow, such as the image build's (1200 s)."""
    ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert ini["timeout"] == 300
    assert "faulthandler_timeout" not in ini


def collected(*args: str) -> list[str]:
    """The files of the tests pytest would run, in the order it would run them."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", *args], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode in (0, 5), out.stdout + out.stderr
    return list(dict.fromkeys(line.split("::")[0] for line in out.stdout.splitlines()
                              if "::" in line))


def test_the_second_pass_runs_only_what_can_depend_on_the_cache_mode() -> None:
    """Pure code, the set-up and the deployment run in the first pass only; a FUSE test runs
    in both."""
    files = ["tests/unit/test_tree.py", "tests/e2e/test_readme.py", "tests/deploy/test_helm.py",
             "tests/fuse/test_reads.py"]
    assert set(collected(*files)) == set(files)
    assert collected("--mode-dependent-only", *files) == ["tests/fuse/test_reads.py"]
    missing = [p for p in ONCE if not (REPO / p).exists()]
    assert not missing, f"tests/helpers/passes.py names what is not there: {missing}"


def test_the_slowest_modules_come_first_and_unit_tests_last() -> None:
    """The image build starts first: a worker that took it last would keep the run waiting
    for minutes after the other one finished."""
    files = collected()
    assert files[0] == "tests/deploy/test_image.py"
    first_unit = next(i for i, f in enumerate(files) if f.startswith("tests/unit/"))
    assert all(f.startswith("tests/unit/") for f in files[first_unit:])


class RunBase:
    """A stand-in for pytest's TempPathFactory, as a pytest-xdist worker's sees it."""

    def __init__(self, worker_base: Path) -> None:
        worker_base.mkdir(parents=True)
        self.base = worker_base

    def getbasetemp(self) -> Path:
        return self.base


def test_what_one_worker_makes_the_others_reuse(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A session fixture's build (the Go reader) is made once in the run's directory, shared
    by its workers; a make that fails leaves nothing, and the next asks again."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    made: list[Path] = []

    def make(dest: Path) -> None:
        made.append(dest)
        (dest / "out").write_text("built")

    def fail(dest: Path) -> None:
        raise RuntimeError("the build failed")

    gw0, gw1 = (RunBase(tmp_path / f"popen-{w}") for w in ("gw0", "gw1"))
    with pytest.raises(RuntimeError):
        made_once(gw0, "thing", fail)  # type: ignore[arg-type]
    assert not (tmp_path / "thing").exists()
    first = made_once(gw0, "thing", make)  # type: ignore[arg-type]
    assert made_once(gw1, "thing", make) == first == tmp_path / "thing"  # type: ignore[arg-type]
    assert len(made) == 1 and (first / "out").read_text() == "built"
