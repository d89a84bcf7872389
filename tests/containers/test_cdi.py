"""The mission's main use, end to end on a real runtime: a container given the CDI device
sees the simulated node at the kernel paths with every consumer (Go and static ones
included), and keeps its own cgroups and network interfaces."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mokkafs.delivery.cdi import UPSTREAM_SCHEMA, validate
from mokkafs.delivery.records import RECORDS
from mokkafs.errors import MokkafsError
from mokkafs.host.mountinfo import FSTYPE, parse
from mokkafs.serve import READY
from tests.helpers.containers import (
    CDI_DIR,
    HOST_TOOLS,
    IMAGE,
    RUN,
    Node,
    node_args,
    podman,
)
from tests.helpers.mounts import (
    HOST_ATTRIBUTE,
    REPO,
    free_port,
    mokkafs_mount,
    shared_parent,
    wait_for,
)
from tests.helpers.profiles import state_of
from tests.helpers.tools import require_tool
from tests.helpers.topology import check_hwloc

pytestmark = pytest.mark.consumers

SCRIPT = r"""
echo ==lspci; lspci -nn -k 2>/dev/null
echo ==ibstat; ibstat -l
echo ==ibstatus; ibstatus
echo ==ibv; ibv_devices
echo ==procdevices; cat /proc/devices
echo ==net; ls /sys/class/net
echo ==iplink; ip -o link | cut -d: -f2 | cut -d@ -f1 | tr -d ' '
echo ==host; cat /sys/devices/system/clocksource/clocksource0/current_clocksource
echo ==cgroup; ls /sys/fs/cgroup
echo ==lstopo; lstopo-no-graphics -v --whole-io 2>/dev/null
echo ==ibdump; /ibdump
echo ==machine; cat /sys/class/dmi/id/product_name
echo ==nvmodule; cat /sys/module/nvidia/version /sys/module/nvidia_peermem/version
echo ==nvversion; cat /proc/driver/nvidia/version
echo ==information; cat /proc/driver/nvidia/gpus/*/information
echo ==rdmacm; stat -c '%F %t:%T' /dev/infiniband/rdma_cm
echo ==devopen; python3 -c 'import os
for p in ("/dev/infiniband/uverbs0", "/dev/infiniband/rdma_cm"):
    try:
        os.close(os.open(p, os.O_RDWR)); print(p, "opened")
    except OSError as e:
        print(p, e.errno)'
echo ==procmodules; [ -e /proc/modules ] && grep -c '^nvidia ' /proc/modules || echo none
echo ==lspcit; lspci -t
echo ==nccl; python3 /topology.py /sys nccl 0000:1b:00.0 mlx5_0 mlx5_1
echo ==dra; python3 /topology.py /sys dra 0000:1b:00.0 0000:18:00.0
echo ==nodeexp
prometheus-node-exporter --web.listen-address=127.0.0.1:19100 --collector.disable-defaults \
  --collector.infiniband >/dev/null 2>&1 & p=$!
for i in 1 2 3 4 5 6 7 8 9 10; do curl -sf 127.0.0.1:19100/metrics >/tmp/m && break; sleep 0.5; done
kill $p
grep -E '^node_(infiniband_info|scrape_collector_success)' /tmp/m
echo ==end
"""


def sections(output: str) -> dict[str, str]:
    parts = re.split(r"^==(\w+)\n", output, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


@pytest.mark.once  # static content, which both modes serve alike
def test_every_consumer_in_one_container(h100_node: Node, ibdump: Path) -> None:
    state = state_of(h100_node.profile, node_name="node-a")
    readers = REPO / "tests/helpers/topology.py"
    out = sections(h100_node.run(SCRIPT, "-v", f"{ibdump}:/ibdump:ro",
                                 "-v", f"{readers}:/topology.py:ro"))
    gpus = state.gpus()
    lspci = out["lspci"]
    assert lspci.count("3D controller [0302]: NVIDIA Corporation GH100[H100 SXM5 80GB]") == len(
        gpus)
    assert lspci.count("Kernel driver in use: nvidia") == len(gpus) + 4  # and 4 NVSwitches
    assert lspci.count("Kernel driver in use: mlx5_core") == len(state.hcas)
    assert lspci.count("Kernel driver in use: pcieport") == len(
        [f for f in state.functions if f.bridge])
    assert "Red Hat" not in lspci and "Virtio" not in lspci  # none of the host's devices
    assert out["ibstat"].split() == sorted(h.name for h in state.hcas)
    ports = sum(len(h.ports) for h in state.hcas)
    assert out["ibstatus"].count("state:\t\t 4: ACTIVE") == ports
    for hca in state.hcas:
        assert f"{hca.node_guid:016x}" in out["ibv"]
    assert re.search(r"(?m)^235 nvidia-caps-imex-channels$", out["procdevices"])
    assert re.search(r"(?m)^231 infiniband_verbs$", out["procdevices"])
    # The container's own world is intact:
    assert sorted(out["net"].split()) == sorted(out["iplink"].split())  # its netns only
    assert set(out["net"].split()) != set(os.listdir("/sys/class/net"))  # not the host's
    assert out["host"] == (Path("/sys") / HOST_ATTRIBUTE).read_text()
    assert out["cgroup"].split(), "cgroups are mounted over the view's fs/cgroup"
    lines = out["lstopo"].splitlines()
    for hca in state.hcas:
        idx = next(i for i, line in enumerate(lines) if f'"{hca.name}"' in line)
        assert f"busid={hca.bdf}" in lines[idx - 1]
    check_hwloc(lines, state)  # each GPU and its NIC below one switch
    assert sorted(json.loads(out["ibdump"])) == sorted(h.name for h in state.hcas)  # static Go
    assert 'node_scrape_collector_success{collector="infiniband"} 1' in out["nodeexp"]
    assert out["nodeexp"].count("node_infiniband_info{") == len(state.hcas)
    # the platform and the drivers' own files
    assert out["machine"] == "DGXH100\n"
    assert out["nvmodule"] == f"{state.driver.version}\n" * 2
    assert out["nvversion"].startswith("NVRM version: NVIDIA UNIX Open Kernel Module for "
                                       f"x86_64  {state.driver.version}  Release Build")
    for gpu in gpus:
        assert f"Bus Location: \t {gpu.bdf}\n" in out["information"]
        assert gpu.gpu is not None and f"GPU UUID: \t {gpu.gpu.uuid}\n" in out["information"]
    assert out["rdmacm"] == "character special file a:38\n"  # 10:56
    # to stat, never to open: on a host with RDMA hardware these are its devices
    assert out["devopen"] == "/dev/infiniband/uverbs0 1\n/dev/infiniband/rdma_cm 1\n"  # EPERM
    # /proc/modules is bound where the host kernel has one; this one may be built without
    assert out["procmodules"] == ("1\n" if Path("/proc/modules").exists() else "none\n")
    assert "-[17-1b]--+-00.0-[18]----00.0" in out["lspcit"]
    assert out["nccl"].split() == ["PIX", "PHB"]  # its compute NIC; a storage card
    assert out["dra"].split() == ["pci0000:15", "pci0000:15"]


def test_a_swap_is_seen_inside_a_running_container(h100_node: Node) -> None:
    name = f"mokkafs-swap-{os.getpid()}"
    try:
        podman("run", "-d", "--name", name, *RUN, "--device", h100_node.device(), *HOST_TOOLS,
               IMAGE, "sleep", "600")
        def bdfs() -> list[str]:
            return podman("exec", name, "ls", "/sys/bus/pci/devices").stdout.split()

        assert "0000:1b:00.0" in bdfs()
        tmp = h100_node.profile.with_name(".swap")
        tmp.write_text((REPO / "mokkafs/profiles/a100.yaml").read_text())
        os.rename(tmp, h100_node.profile)
        expected = sorted(f.bdf for f in state_of("a100").functions)
        wait_for(lambda: bdfs() == expected, 20, "the a100 view inside the container")
        lspci = podman("exec", name, "lspci", "-nn").stdout
        assert lspci.count("GA100 [A100 SXM4 40GB] [10de:20b0]") == 8
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def test_a_new_driver_and_machine_show_in_every_file_of_a_running_container(
        h100_node: Node) -> None:
    name = f"mokkafs-driver-{os.getpid()}"
    files = ["/sys/class/dmi/id/product_name", "/sys/module/nvidia/version",
             "/sys/module/nvidia_peermem/version", "/proc/driver/nvidia/version",
             "/proc/driver/nvidia/gpus/0000:1b:00.0/information"]
    try:
        podman("run", "-d", "--name", name, *RUN, "--device", h100_node.device(), *HOST_TOOLS,
               IMAGE, "sleep", "600")

        def contents() -> list[str]:
            return [podman("exec", name, "cat", f).stdout for f in files]

        before = contents()
        assert before[0] == "DGXH100\n" and "550.163.01" in before[1]
        text = h100_node.profile.read_text()
        changed = text.replace('driver_version: "550.163.01"', 'driver_version: "580.95.05"')
        changed = changed.replace("product_name: DGXH100", "product_name: DGXH200")
        assert changed.count("580.95.05") == 1 and "DGXH200" in changed
        tmp = h100_node.profile.with_name(".driver")
        tmp.write_text(changed)
        os.rename(tmp, h100_node.profile)
        wait_for(lambda: contents()[0] == "DGXH200\n", 20, "the new machine in the container")
        after = contents()
        assert after[1] == after[2] == "580.95.05\n"
        assert "  580.95.05  Release Build" in after[3]
        assert "GPU Firmware: \t 580.95.05\n" in after[4]
        assert all("550.163.01" not in a for a in after)
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def test_faults_applied_at_run_time_reach_a_running_container(h100_node: Node,
                                                              tmp_path: Path) -> None:
    name = f"mokkafs-faults-{os.getpid()}"
    faults = tmp_path / "faults.yaml"
    faults.write_text("faults:\n"
                      "  - {name: down, kind: ib-port-down, target: mlx5_0/1, cable: true}\n"
                      "  - {name: lost, kind: gpu-lost, target: gpu0}\n"
                      "  - {name: gone, kind: hca-removed, target: mlx5_3}\n")

    def fault(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "mokkafs", "fault", "--control",
                        str(h100_node.control), *args], check=True, cwd=REPO, timeout=60)

    def inside(*cmd: str) -> str:
        return podman("exec", name, *cmd).stdout

    try:
        podman("run", "-d", "--name", name, *RUN, "--device", h100_node.device(), *HOST_TOOLS,
               IMAGE, "sleep", "600")
        assert "State: Active" in inside("ibstat", "mlx5_0")
        fault("apply", str(faults))
        ibstat = inside("ibstat", "mlx5_0")
        assert "State: Down" in ibstat and "Physical state: Polling" in ibstat
        assert "mlx5_3" not in inside("ibstat", "-l").split()
        assert "!!! Unknown header type 7f" in inside("lspci", "-vvv", "-s", "1b:00.0")
        info = inside("cat", "/proc/driver/nvidia/gpus/0000:1b:00.0/information")
        assert "Video BIOS: \t ??.??.??.??.??" in info
        assert "0000:40:00.0" not in inside("ls", "/sys/bus/pci/devices").split()
        fault("clear")
        assert "State: Active" in inside("ibstat", "mlx5_0")
        assert "mlx5_3" in inside("ibstat", "-l").split()
        assert "Unknown header type" not in inside("lspci", "-vvv", "-s", "1b:00.0")
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


@pytest.mark.once  # the spec's life, not the view's answers
def test_spec_lifecycle(h100_node: Node, tmp_path: Path) -> None:
    spec = json.loads(h100_node.spec.read_text())  # it exists once the mount is ready
    assert spec["cdiVersion"] == "0.5.0" and spec["kind"] == h100_node.kind
    assert [d["name"] for d in spec["devices"]] == [
        "all", "sys", "proc", "proc-mount", "proc-devices", "proc-devices-mount",
        "proc-machine", "proc-machine-mount", "kmsg", "nvml", "nvidia", "infiniband"]
    nodes = {n["path"]: (n["major"], n["minor"]) for n in spec["devices"][-1][
        "containerEdits"]["deviceNodes"]}
    assert nodes["/dev/infiniband/rdma_cm"] == (10, 56)
    # each device that mounts /sys records the container's mounts (restart survival)
    hooks = {d["name"]: [h["args"][1] for h in d["containerEdits"].get("hooks", [])]
             for d in spec["devices"]}
    assert hooks["all"] == ["bind", "link", "ldcache", "record", "forget"]
    assert hooks["sys"] == ["record", "forget"]
    validate(spec)
    validate(spec, UPSTREAM_SCHEMA)
    for version in ("0.5.0", "0.8.0"):
        out = tmp_path / f"spec-{version}.json"
        subprocess.run([sys.executable, "-m", "mokkafs", "cdi", "--mountpoint",
                        str(h100_node.mount.path), "--cdi-version", version, "--output",
                        str(out)], check=True, cwd=REPO, timeout=60)
        written = json.loads(out.read_text())
        assert written["cdiVersion"] == version
        # the same devices as the daemon's, the nvml device's library named by the same version
        assert [d["name"] for d in written["devices"]] == [d["name"] for d in spec["devices"]]
        nvml = [d for d in written["devices"] if d["name"] == "nvml"]
        assert nvml == [d for d in spec["devices"] if d["name"] == "nvml"]
        validate(written)
        validate(written, UPSTREAM_SCHEMA)
    mount = h100_node.mount
    mount.process.send_signal(signal.SIGTERM)
    mount.process.wait(timeout=10)
    log = mount.log_text()
    assert log.index("published CDI spec") < log.index(READY)
    assert log.index("retracted CDI spec") < log.index("unmounted")
    assert not h100_node.spec.exists()


@pytest.mark.once  # the spec's life, not the view's answers
def test_cdi_refuses_a_mountpoint_that_is_not_serving(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "mokkafs", "cdi", "--mountpoint",
                             str(tmp_path)], capture_output=True, text=True, cwd=REPO,
                            timeout=60)
    assert result.returncode == 3  # MountError
    assert "is not a mokkafs mount" in result.stderr
    assert result.stdout == ""


@pytest.mark.once  # the spec's life, not the view's answers
def test_spec_is_absent_until_the_mount_serves(tmp_path: Path) -> None:
    """A bad profile: nothing is mounted, so no spec may appear."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus: 8\n")
    cdi = tmp_path / "cdi"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", str(bad),
                             "--cdi-dir", str(cdi), str(mnt)], capture_output=True, text=True,
                            cwd=REPO, timeout=60)
    assert result.returncode == 2
    assert not cdi.exists() or not any(cdi.iterdir())



def runtime_mounts_over_sys(name: str) -> dict[str, tuple[str, str, str]]:
    """{mount point: (filesystem type, root within it, per-mount options)} of what the runtime
    mounted below /sys in a running container (not the view's own FUSE mounts)."""
    out = podman("exec", name, "cat", "/proc/self/mountinfo").stdout
    return {m.point: (m.fstype, m.root, m.options) for m in parse(out)
            if m.point.startswith("/sys/") and m.fstype != FSTYPE}


def test_running_container_survives_a_daemon_restart(tmp_path: Path,
                                                      hosttools_image: str) -> None:
    """Kill the daemon (as a crash or an upgrade would), start a new one: the container that
    kept running reads the view again at the kernel paths, without a restart of its own.
    In keep-cache mode, the kernel detaches the runtime's cgroup mounts over the dead view
    once a walk of it fails the revalidation of its expired entries (any `exec` walks it):
    the container walks it until that happened, and the new daemon makes them again from the
    record the poststart hook made (in no-open mode, such a walk fails with ENOTCONN and
    the mounts stay). Twice over; the poststop hook removes the record."""
    kind = f"mokkafs-test-{secrets.token_hex(4)}.io/node"
    profile = REPO / "mokkafs/profiles/h100.yaml"
    name = f"mokkafs-restart-{os.getpid()}"

    def read(path: str) -> subprocess.CompletedProcess[str]:
        return podman("exec", name, "cat", path, check=False)

    def answers(path: str, value: str) -> bool:
        return read(path).stdout == value

    def walked_until_detached(pid: str) -> bool:
        podman("exec", name, "ls", "/sys/fs", check=False)  # a walk of the dead view
        table = parse(Path(f"/proc/{pid}/mountinfo").read_text())
        return not any(m.point.startswith("/sys/fs/cgroup") for m in table)

    with shared_parent(tmp_path) as share, contextlib.ExitStack() as daemons:
        live = daemons.enter_context(mokkafs_mount(share / "node",
                                                   node_args(profile, kind, free_port())))
        try:
            podman("run", "-d", "--name", name, *RUN, "--device", f"{kind}=all", *HOST_TOOLS,
                   IMAGE, "sleep", "600")
            assert read("/sys/bus/pci/devices/0000:1b:00.0/device").stdout == "0x2330\n"
            over_sys = runtime_mounts_over_sys(name)
            assert "/sys/fs/cgroup" in over_sys  # what podman mounts over the view's /sys
            cgroups = podman("exec", name, "ls", "/sys/fs/cgroup").stdout
            assert cgroups
            pid, cid = podman("inspect", "-f", "{{.State.Pid}} {{.Id}}", name).stdout.split()
            assert (RECORDS / cid).read_text().startswith("mnt:")
            # Twice: the second re-attach finds the mounts the first made in the record it made.
            # Each time a path the container has not read yet: what it read may still be
            # answered from the dead mount's kernel caches (no-open mode); all else needs a
            # daemon.
            gpu = "/sys/bus/pci/devices/0000:1b:00.0"
            for unread, value in ((f"{gpu}/class", "0x030200\n"), (f"{gpu}/vendor", "0x10de\n")):
                live.process.kill()
                live.process.wait()
                live.process.returncode = 0  # killed on purpose; the fixture checks the last
                assert "Transport endpoint is not connected" in read(unread).stderr
                if "keep-cache cache mode" in live.log_text():
                    wait_for(lambda: walked_until_detached(pid), 30,
                             "the kernel to detach the cgroup mounts over the dead view")
                expect = ["holds a dead FUSE mount", "did not stop cleanly"]
                live = daemons.enter_context(mokkafs_mount(
                    share / "node", node_args(profile, kind, free_port()), expect=expect))
                try:
                    wait_for(functools.partial(answers, unread, value), 10,
                             "the view again inside the running container")
                except TimeoutError as exc:  # what the re-attach did, and what it saw
                    table = Path(f"/proc/{pid}/mountinfo").read_text()
                    raise AssertionError(f"{live.log_text()}\n{table}") from exc
                assert read("/sys/bus/pci/devices/0000:1b:00.0/device").stdout == "0x2330\n"
                assert "235 nvidia-caps-imex-channels" in read("/proc/devices").stdout
                assert read("/sys/class/infiniband/mlx5_0/fw_ver").stdout == "28.39.2048\n"
                assert "0000:1b:00.0" in podman("exec", name, "ls",
                                                "/run/mokkafs-nvml/gpus").stdout.split()
                assert "re-attached" in live.log_text()
                # the runtime's own mounts over /sys (its masks, the cgroup filesystem) too,
                # read-only where they were: the container's own cgroup, the masks empty
                assert runtime_mounts_over_sys(name) == over_sys, live.log_text()
                assert podman("exec", name, "ls", "-A", "/sys/firmware").stdout == ""
                assert podman("exec", name, "ls", "/sys/fs/cgroup").stdout == cgroups
            podman("rm", "-f", "-t", "0", name)
            assert not (RECORDS / cid).exists(), "the poststop hook left the record"
        finally:
            podman("rm", "-f", "-t", "0", name, check=False)
            # killed daemons retract nothing: never leave a spec behind for later runs
            (CDI_DIR / (kind.replace("/", "_") + ".json")).unlink(missing_ok=True)


@pytest.mark.once  # the spec's life, not the view's answers
def test_a_spec_that_cannot_be_published_stops_the_daemon_cleanly(tmp_path: Path) -> None:
    blocked = tmp_path / "cdi"
    blocked.write_text("a file where the CDI directory should be")
    with shared_parent(tmp_path) as share:
        (share / "node").mkdir()
        result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                                 "--cdi-dir", str(blocked), str(share / "node")],
                                capture_output=True, text=True, cwd=REPO, timeout=60)
        assert result.returncode == 4
        assert f"CDI directory {blocked}: File exists" in result.stderr
        assert "Traceback" not in result.stderr
        assert not os.path.ismount(share / "node")


@pytest.mark.once  # the spec's life, not the view's answers
def test_schemas_reject_a_broken_spec() -> None:
    spec = {"cdiVersion": "0.5.0", "kind": "mokkafs.io/node",
            "devices": [{"name": "all", "containerEdits": {"mounts": [{"hostPath": "/x"}]}}]}
    for schema in (None, UPSTREAM_SCHEMA):
        with pytest.raises(MokkafsError, match="containerPath"):
            validate(spec) if schema is None else validate(spec, schema)


@pytest.mark.once  # static content, which both modes serve alike
def test_direct_proc_devices_mount_where_the_runtime_allows_it(h100_node: Node) -> None:
    """crun accepts a mount over /proc/devices (the `proc-devices-mount` device); runc refuses
    it, which is why `all` uses the hook. crun needs the hybrid cgroup2 mount hidden, done here
    in a private mount namespace (consumers.md §4.1)."""
    require_tool("crun")
    device = h100_node.device("proc-devices-mount")
    run = " ".join(["podman", "run", "--rm", "--runtime", "crun", "--ulimit",
                    "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--device", device,
                    *HOST_TOOLS, IMAGE, "cat", "/proc/devices"])
    result = subprocess.run(["unshare", "-m", "sh", "-c", "mount --make-rprivate / && "
                             "(umount /sys/fs/cgroup/unified 2>/dev/null || true) && " + run],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert "235 nvidia-caps-imex-channels" in result.stdout
    refused = podman("run", "--rm", *RUN, "--device", device, *HOST_TOOLS, IMAGE, "cat",
                     "/proc/devices", check=False)
    assert refused.returncode != 0
    assert "inside /proc" in refused.stderr


@pytest.mark.once  # the spec's life, not the view's answers
def test_a_parent_holding_anything_else_is_refused(tmp_path: Path) -> None:
    """Every container given the spec holds the mountpoint's parent (for restart survival):
    with a file, a socket or a writable mount beside the mountpoint, nothing is published."""
    share = tmp_path / "share"
    share.mkdir()
    (share / "node").mkdir()
    (share / "canary").write_text("root's secret\n")
    os.chmod(share / "canary", 0o600)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(share / "canary.sock"))
    cdi = tmp_path / "cdi"
    try:
        result = subprocess.run([sys.executable, "-m", "mokkafs", "mount", "--profile", "t4",
                                 "--cdi-dir", str(cdi), str(share / "node")],
                                capture_output=True, text=True, cwd=REPO, timeout=60)
    finally:
        server.close()
    assert result.returncode == 4, result.stderr
    assert "also holds canary, canary.sock" in result.stderr
    assert "Traceback" not in result.stderr
    assert not os.path.ismount(share / "node") and not any(cdi.glob("*.json"))


@pytest.mark.once  # the spec's life, not the view's answers
def test_cdi_refuses_a_mount_whose_parent_holds_anything_else(tmp_path: Path) -> None:
    """``mokkafs cdi`` writes the same spec as the daemon, so it checks the same parent."""
    (tmp_path / "canary").write_text("root's secret\n")
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "t4"]) as mount:
        result = subprocess.run([sys.executable, "-m", "mokkafs", "cdi", "--mountpoint",
                                 str(mount.path)], capture_output=True, text=True, cwd=REPO,
                                timeout=60)
    assert result.returncode == 4, result.stderr
    assert "also holds canary" in result.stderr and result.stdout == ""


@pytest.mark.once  # static content, which both modes serve alike
def test_a_container_sees_the_view_and_nothing_else_of_the_host(h100_node: Node) -> None:
    """Canaries next to the share, and a writable tmpfs mounted below the view by root after
    the start: a container given the node sees the share hold only the view, cannot write
    anywhere in it, and cannot reach the canaries."""
    share = h100_node.mount.path.parent
    grandparent = share.parent
    (grandparent / "canary").write_text("root's secret\n")
    submount = h100_node.mount.sys / "kernel/tracing"  # an empty directory of the view
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(submount)], check=True)
    try:
        out = h100_node.run(
            "ls -A /run/mokkafs-host; echo ==; "
            "touch /run/mokkafs-host/x 2>&1; touch /sys/kernel/tracing/x 2>&1; "
            "touch /run/mokkafs-host/node/sys/kernel/tracing/x 2>&1; echo ==; "
            "cat /run/canary /canary 2>&1; ls /run/mokkafs-host/.. | grep -c canary; true")
    finally:
        subprocess.run(["umount", str(submount)], check=True)
    listing, writes, canary = out.split("==\n")
    assert listing.split() == ["node"]
    assert writes.count("Read-only file system") == 3, writes
    assert "secret" not in canary and canary.split()[-1] == "0"
    assert not list(submount.iterdir())  # nothing was written through the view
