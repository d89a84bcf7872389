"""mokkafs's NVML in tests: the environment ``mokkafs nvml-env`` prints, and what the view's
own files say of each GPU (what NVML must agree with, read straight from the mount)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mokkafs.model.pci import LINK_GENERATIONS
from mokkafs.profile.compile.cpus import parse_cpulist
from tests.helpers.mounts import REPO, wait_for
from tests.helpers.tools import require_tool


@dataclass(frozen=True)
class ViewGpu:
    """One GPU as proc/driver/nvidia/gpus/<bdf>/information and its sysfs directory say."""

    bdf: str
    name: str
    uuid: str
    minor: int
    device_id: int  # device << 16 | vendor, as NVML's pciDeviceId
    subsystem_id: int
    link: tuple[int, int, int, int]  # current gen and width, max gen and width
    numa: int
    cpus: frozenset[int]


def information(root: Path, bdf: str) -> dict[str, str]:
    text = (root / "proc/driver/nvidia/gpus" / bdf / "information").read_text()
    return {k.strip(): v.strip() for k, v in re.findall(r"^([^:\n]+):(.*)$", text, re.M)}


def view_gpus(root: Path) -> list[ViewGpu]:
    """The GPUs the driver lists and does not exclude, in PCI order."""
    gpus = []
    for bdf in sorted(os.listdir(root / "proc/driver/nvidia/gpus")):
        info = information(root, bdf)
        if info["GPU Excluded"] == "Yes":
            continue
        sysfs = root / "sys/bus/pci/devices" / bdf

        def attr(name: str, sysfs: Path = sysfs) -> str:
            return (sysfs / name).read_text().strip()

        gpus.append(ViewGpu(
            bdf=bdf, name=info["Model"], uuid=info["GPU UUID"], minor=int(info["Device Minor"]),
            device_id=int(attr("device"), 16) << 16 | int(attr("vendor"), 16),
            subsystem_id=(int(attr("subsystem_device"), 16) << 16
                          | int(attr("subsystem_vendor"), 16)),
            link=(LINK_GENERATIONS[attr("current_link_speed")], int(attr("current_link_width")),
                  LINK_GENERATIONS[attr("max_link_speed")], int(attr("max_link_width"))),
            numa=int(attr("numa_node")), cpus=frozenset(parse_cpulist(attr("local_cpulist")))))
    return gpus


def nvml_bus_id(bdf: str) -> str:
    """A sysfs BDF in NVML's spelling: "0000:1b:00.0" -> "00000000:1B:00.0"."""
    domain, rest = bdf.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


def nvml_env(mountpoint: Path, control: Path | None = None) -> dict[str, str]:
    """What ``mokkafs nvml-env`` exports for a serving mount (with ``--control``: its daemon's
    control socket too)."""
    more = ["--control", str(control)] if control else []
    out = subprocess.run([sys.executable, "-m", "mokkafs", "nvml-env", "--mountpoint",
                          str(mountpoint), *more], capture_output=True, text=True, check=True,
                         cwd=REPO, timeout=60).stdout
    env = dict(re.findall(r"^export (\w+)=(\S+)$", out, re.M))
    assert sorted(env) == sorted(["LD_LIBRARY_PATH", "MOKKAFS_ROOT",
                                  *(["MOKKAFS_CONTROL"] if control else [])]), out
    return env


def place_values(root: Path, bdf: str) -> dict[str, str]:
    """A GPU's file in NVML's own place, run/mokkafs-nvml/gpus/<bdf>, as a dict."""
    text = (root / "run/mokkafs-nvml/gpus" / bdf).read_text()
    return dict(line.split("=", 1) for line in text.splitlines())


def profile_defaults(profile: str) -> dict[str, Any]:
    """A shipped profile's ``device_defaults``, as its YAML says."""
    doc = yaml.safe_load((REPO / "mokkafs/profiles" / f"{profile}.yaml").read_text())
    return dict(doc["device_defaults"])


class PynvmlProcess:
    """A Python process running ``script`` (nvidia-ml-py, handles made once) in ``env``: at
    each ``read()`` it is sent a line and answers one line of JSON; ``close()`` ends its stdin
    (its loop then ends) and gives its output."""

    def __init__(self, script: str, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, **env},
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=REPO)

    def read(self) -> Any:
        return self.ask("")

    def ask(self, line: str) -> Any:
        """Send ``line``; its answer."""
        self.send(line)
        return self.read_line()

    def ask_until(self, line: str, until: Callable[[Any], object], what: str) -> Any:
        """The answer to ``line`` once ``until`` holds of it (asked again until then)."""
        got: list[Any] = []

        def ready() -> bool:
            got[:] = [self.ask(line)]
            return bool(until(got[0]))

        wait_for(ready, 60, what)
        return got[0]

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def read_line(self) -> Any:
        """The next line of JSON the process prints."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, self.close()
        return json.loads(line)

    def close(self) -> str:
        out, err = self.process.communicate(timeout=60)
        return out + err


def c_program(factory: pytest.TempPathFactory, name: str) -> Path:
    """One of NVML's C test programs (native/tests/<name>.c), built under AddressSanitizer
    and UBSan into a directory of its own."""
    require_tool("make")
    out = factory.mktemp(name)
    subprocess.run(["make", "-s", "-C", str(REPO / "native"), f"OUT={out}", f"{out}/{name}"],
                   check=True, timeout=300)
    return out / name


def run_c_program(program: Path, root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The program on the view at ``root``; a sanitizer's finding is its own exit status."""
    env = {**os.environ, "MOKKAFS_ROOT": str(root),
           "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=86",
           "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1:exitcode=87"}
    return subprocess.run([str(program), *args], capture_output=True, text=True, timeout=120,
                          env=env)
