"""Every fault kind as the real programs see it on a mount: ibstat, ibstatus, node_exporter,
lspci, hwloc and the driver's own files. (The same through a running container:
tests/containers/test_cdi.py; timing and the control socket: tests/fuse/test_faults.py.)"""

from __future__ import annotations

import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.testing import samples
from tests.helpers.consumers import node_exporter, with_sys
from tests.helpers.mounts import SHIPPED_PROFILES, Mount, mokkafs_mount
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.consumers

# One of each kind, on targets of their own, all in effect from the start.
FAULTS = """faults:
  - {name: down, kind: ib-port-down, target: mlx5_0/1}
  - {name: errors, kind: ib-errors, target: mlx5_4/1,
     rates: {symbol_error: 1000, port_rcv_errors: 50}}
  - {name: narrow, kind: ib-degraded, target: mlx5_3/1, width: 2}
  - {name: slow-pcie, kind: pcie-degraded, target: gpu1, gen: 3, width: 8}
  - {name: lost, kind: gpu-lost, target: gpu3}
  - {name: gpu-gone, kind: gpu-removed, target: gpu7}
  - {name: hca-gone, kind: hca-removed, target: mlx5_5}
"""
LOST, REMOVED, DEGRADED = "0000:61:00.0", "0000:df:00.0", "0000:43:00.0"


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    base = tmp_path_factory.mktemp("faulty")
    profile = base / "faulty.yaml"
    profile.write_text((SHIPPED_PROFILES / "h100.yaml").read_text() + FAULTS)
    with mokkafs_mount(base / "mnt", ["--profile", str(profile), "--node-name", "node-a"]) as m:
        yield m


def test_ibstat_and_ibstatus_see_the_port_faults(faulty: Mount) -> None:
    require_tool("ibstat")
    out = with_sys(faulty.sys, "ibstat mlx5_0")
    assert "State: Down" in out and "Physical state: Disabled" in out and "Rate: 10" in out
    assert "mlx5_5" not in with_sys(faulty.sys, "ibstat -l").split()
    status = with_sys(faulty.sys, "ibstatus")
    blocks = {m.group(1): m.group(0) for m in re.finditer(
        r"Infiniband device '(\w+)' port 1 status:.*?(?=Infiniband device|\Z)", status, re.S)}
    assert "state:\t\t 1: DOWN" in blocks["mlx5_0"]
    assert "phys state:\t 3: Disabled" in blocks["mlx5_0"]
    assert "rate:\t\t 200 Gb/sec (2X NDR)" in blocks["mlx5_3"]
    assert "state:\t\t 4: ACTIVE" in blocks["mlx5_4"]


def test_node_exporter_reports_state_link_downs_and_errors(faulty: Mount) -> None:
    with node_exporter(faulty.sys) as url, urllib.request.urlopen(url, timeout=30) as r:
        values = samples(r.read().decode())

    def of(metric: str, device: str) -> float:
        return values[f'node_infiniband_{metric}{{device="{device}",port="1"}}']

    assert of("state_id", "mlx5_0") == 1 and of("state_id", "mlx5_4") == 4
    assert of("physical_state_id", "mlx5_0") == 3
    assert of("link_downed_total", "mlx5_0") == 1
    assert of("symbol_error_total", "mlx5_4") > 0
    assert of("port_errors_received_total", "mlx5_4") > 0
    assert of("symbol_error_total", "mlx5_6") == 0
    assert of("rate_bytes_per_second", "mlx5_3") == 200 * 125_000_000
    assert not [k for k in values if 'device="mlx5_5"' in k]


def lspci(faulty: Mount, *args: str) -> str:
    return subprocess.run([require_tool("lspci"), "-A", "linux-sysfs", "-O",
                           f"sysfs.path={faulty.sys}/bus/pci", *args], capture_output=True,
                          text=True, timeout=60, check=True).stdout


def test_lspci_sees_the_lost_the_removed_and_the_degraded(faulty: Mount) -> None:
    lost = lspci(faulty, "-vvv", "-s", LOST[5:])
    assert "!!! Unknown header type 7f" in lost and "Kernel driver in use: nvidia" in lost
    assert lspci(faulty, "-s", REMOVED[5:]) == ""
    degraded = lspci(faulty, "-vvv", "-s", DEGRADED[5:])
    assert "LnkSta:\tSpeed 8GT/s (downgraded), Width x8 (downgraded)" in degraded
    hex_dump = lspci(faulty, "-x", "-s", LOST[5:])
    assert hex_dump.count("ff ff ff ff ff ff ff ff ff ff ff ff ff ff ff ff") == 4


def test_hwloc_and_the_driver_files(faulty: Mount) -> None:
    exe = require_tool("lstopo-no-graphics")
    topo = subprocess.run([exe, "-v", "--whole-io"], capture_output=True, text=True, check=True,
                          timeout=120, env={"HWLOC_FSROOT": str(faulty.path),
                                            "PATH": "/usr/bin:/bin"}).stdout
    assert f"busid={REMOVED}" not in topo and '"mlx5_5"' not in topo
    assert '"mlx5_0"' in topo and f"busid={LOST}" in topo
    gpus = Path(faulty.path / "proc/driver/nvidia/gpus")
    assert REMOVED not in {p.name for p in gpus.iterdir()}
    info = (gpus / LOST / "information").read_text()
    assert "Video BIOS: \t ??.??.??.??.??\n" in info and f"Bus Location: \t {LOST}\n" in info
