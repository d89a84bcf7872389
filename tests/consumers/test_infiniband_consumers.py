"""Real InfiniBand consumers against a real mount: ibstat, ibstatus, ibv_devices,
node_exporter, Go prometheus/procfs and hwloc."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mokkafs.model.identity import format_guid
from mokkafs.surfaces.infiniband import device_numbers
from tests.helpers.clocked import Clocked, clocked_mount
from tests.helpers.consumers import node_exporter, with_dev_nodes, with_sys
from tests.helpers.profiles import state_of
from tests.helpers.tools import require_tool

pytestmark = pytest.mark.consumers

FAST_TRAFFIC = """
  traffic:
    xmit_bytes_per_sec: 1.0e9
    rcv_bytes_per_sec: 2.0e8
    mean_packet_bytes: 4096
    multicast_fraction: 0.01
"""


@pytest.fixture(scope="module")
def traffic_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = (Path(__file__).parents[2] / "mokkafs/profiles/h100.yaml").read_text()
    path = tmp_path_factory.mktemp("profile") / "h100-traffic.yaml"
    path.write_text(src.replace('  guid_prefix: "946dae"\n',
                                '  guid_prefix: "946dae"\n' + FAST_TRAFFIC.lstrip("\n")))
    return path


@pytest.fixture(scope="module")
def ib_mount(tmp_path_factory: pytest.TempPathFactory, traffic_profile: Path) -> Iterator[Clocked]:
    args = ["--profile", str(traffic_profile), "--node-name", "node-a",
            "--counter-staleness-ms", "0"]
    with clocked_mount(tmp_path_factory.mktemp("ib") / "mnt", args, 5000.0) as mounted:
        yield mounted


def test_ibstat_lists_and_describes_every_hca(ib_mount: Clocked, traffic_profile: Path) -> None:
    require_tool("ibstat")
    state = state_of(traffic_profile, node_name="node-a")
    listed = with_sys(ib_mount.sys, "ibstat -l").split()
    assert listed == sorted(h.name for h in state.hcas)  # libibumad sorts them as strings
    hca = state.hcas[0]
    out = with_sys(ib_mount.sys, "ibstat mlx5_0")
    assert "CA type: MT4129" in out
    assert "Firmware version: 28.39.2048" in out
    assert f"Node GUID: 0x{hca.node_guid:016x}" in out
    assert f"Port GUID: 0x{hca.ports[0].guid:016x}" in out
    assert "State: Active" in out and "Physical state: LinkUp" in out
    assert "Rate: 400" in out
    assert f"Base lid: {hca.ports[0].lid}" in out
    assert "SM lid: 1" in out and "Link layer: InfiniBand" in out


def test_ibstatus(ib_mount: Clocked, traffic_profile: Path) -> None:
    require_tool("ibstatus")
    state = state_of(traffic_profile, node_name="node-a")
    out = with_sys(ib_mount.sys, "ibstatus")
    assert out.count("Infiniband device") == sum(len(h.ports) for h in state.hcas)
    port = state.hcas[-1].ports[0]
    assert f"default gid:\t fe80:0000:0000:0000:{format_guid(port.guid)}" in out
    assert f"base lid:\t 0x{port.lid:x}" in out
    assert "state:\t\t 4: ACTIVE" in out and "phys state:\t 5: LinkUp" in out
    assert "rate:\t\t 400 Gb/sec (4X NDR)" in out


def test_ibv_devices_with_device_nodes(ib_mount: Clocked, traffic_profile: Path) -> None:
    require_tool("ibv_devices")
    state = state_of(traffic_profile, node_name="node-a")
    nodes = device_numbers(state)
    out = with_dev_nodes(nodes, f"SYSFS_PATH={ib_mount.sys} ibv_devices && "
                                f"SYSFS_PATH={ib_mount.sys} ibv_devinfo -l")
    for hca in state.hcas:
        assert re.search(rf"{hca.name}\s+{hca.node_guid:016x}", out), out
    assert f"{len(state.hcas)} HCAs found:" in out
    # Negative control: without the device nodes, libibverbs finds nothing.
    bare = with_dev_nodes([("/dev/zero-only", 1, 5)], f"SYSFS_PATH={ib_mount.sys} ibv_devinfo -l")
    assert "0 HCAs found" in bare


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_node_exporter_reports_every_hca_and_counters_move_at_the_configured_rate(
        ib_mount: Clocked, traffic_profile: Path) -> None:
    """Two scrapes 10 s apart on the daemon's clock: every port moved exactly 10 s worth of
    the profile's rates (1e9 B/s out, 2e8 B/s in), as node_exporter reports them."""
    with node_exporter(ib_mount.sys) as url:
        ib_mount.set(5100.0)
        first = scrape(url)
        ib_mount.set(5110.0)
        second = scrape(url)
    assert first['node_scrape_collector_success{collector="infiniband"}'] == 1
    names = [h.name for h in state_of(traffic_profile, node_name="node-a").hcas]
    assert len([k for k in first if k.startswith("node_infiniband_info{")]) == len(names)
    for name in names:
        labels = f'{{device="{name}",port="1"}}'
        key = f"node_infiniband_port_data_transmitted_bytes_total{labels}"
        assert first[key] == 1.0e9 * 100  # since the node started at 5000 s
        assert second[key] - first[key] == 1.0e9 * 10
        rcv = f"node_infiniband_port_data_received_bytes_total{labels}"
        assert second[rcv] - first[rcv] == 2.0e8 * 10
        # 1e9 B/s in 4096-byte packets is 244,140.625 packets/s, 1 % of them multicast.
        sent = second[f"node_infiniband_port_packets_transmitted_total{labels}"] - first[
            f"node_infiniband_port_packets_transmitted_total{labels}"]
        assert abs(sent - 2_441_406.25) <= 2
        multicast = second[f"node_infiniband_multicast_packets_transmitted_total{labels}"]
        assert abs(multicast - 0.01 * 1e9 / 4096 * 110) <= 1
        info = [k for k in first if k.startswith("node_infiniband_info{") and
                f'device="{name}"' in k]
        assert len(info) == 1 and 'hca_type="MT4129"' in info[0]
        assert first[f"node_infiniband_rate_bytes_per_second{labels}"] == 400 * 125_000_000
        assert second[f"node_infiniband_symbol_error_total{labels}"] == 0


def test_go_procfs_reads_the_infiniband_class(ib_mount: Clocked, ibdump: Path,
                                              traffic_profile: Path) -> None:
    state = state_of(traffic_profile, node_name="node-a")
    result = subprocess.run([str(ibdump), str(ib_mount.sys)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, (result.stderr, ib_mount.mount.log_text()[-3000:])
    data = json.loads(result.stdout)
    assert sorted(data) == sorted(h.name for h in state.hcas)
    dev = data["mlx5_0"]
    assert dev["FirmwareVersion"] == "28.39.2048" and dev["HCAType"] == "MT4129"
    port = dev["Ports"]["1"]
    assert port["State"] == "ACTIVE" and port["PhysState"] == "LinkUp"
    assert port["Rate"] == 400 * 125_000_000
    assert port["Counters"]["PortXmitData"] > 0


def test_lstopo_attaches_every_hca_under_its_pci_device(ib_mount: Clocked,
                                                         traffic_profile: Path) -> None:
    exe = require_tool("lstopo-no-graphics")
    state = state_of(traffic_profile, node_name="node-a")
    out = subprocess.run([exe, "-v", "--whole-io"], capture_output=True, text=True, timeout=120,
                         env={"HWLOC_FSROOT": str(ib_mount.path), "PATH": "/usr/bin:/bin"},
                         check=True).stdout
    lines = out.splitlines()
    for hca in state.hcas:
        found = [i for i, line in enumerate(lines) if f'"{hca.name}"' in line]
        assert found, (hca.name, out[-3000:], ib_mount.mount.log_text()[-3000:])
        idx = found[0]
        parent = lines[idx - 1]
        assert f"busid={hca.bdf}" in parent and "id=15b3:1021" in parent, (parent, lines[idx])
        assert len(lines[idx]) - len(lines[idx].lstrip()) > len(parent) - len(parent.lstrip())
    gpus = [line for line in lines if "id=10de:2330" in line]
    assert len(gpus) == len(state.gpus())
