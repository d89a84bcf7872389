"""MIG and IMEX as the stack's own reading code finds them on a real mount, NVML-free: readers
written to the consumers' published logic (this project's code; the upstream files named
on each), run against the view.

- The device plugin: ``GetMigCapabilityDevicePaths`` and ``GetMigDeviceNodePaths``
  (NVIDIA/k8s-device-plugin ``internal/mig/mig.go``) parse ``mig-minors`` and map each
  instance's capability path to ``/dev/nvidia-caps/nvidia-cap<minor>``; its IMEX code
  (``internal/imex/imex.go``, ``resolveDefaultChannel``) stats
  ``/dev/nvidia-caps-imex-channels/channel0`` and needs a character device.
- The DRA driver: ``GetDevNodesForMigDevice`` (kubernetes-sigs/dra-driver-nvidia-gpu
  ``cmd/gpu-kubelet-plugin/cdi.go``) parses ``gpu<N>/mig/gi<G>/access`` and ``…/ci<C>/access``
  with ``ParseNVCapDeviceInfo`` (``Key: value`` lines) on the ``nvidia-caps`` major
  ``GetDeviceMajor`` finds in ``/proc/devices``; its compute-domain plugin
  (``cmd/compute-domain-kubelet-plugin/nvlib.go``) makes one channel per ``ImexChannelCount``
  (upstream hard-codes 2048 with a TODO to read ``params``, which is what this reader does) on
  the ``nvidia-caps-imex-channels`` major, mode 0666.

The instance list (what NVML would report) comes from the profile's State.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.mounts import mokkafs_mount
from tests.helpers.profiles import state_of

pytestmark = pytest.mark.consumers

CAPS_PATH = "/proc/driver/nvidia/capabilities"


def device_plugin_mig_paths(root: Path) -> dict[str, str]:
    """GetMigCapabilityDevicePaths: capability path -> /dev/nvidia-caps/nvidia-cap<minor>;
    lines that match none of the four forms are skipped."""
    out: dict[str, str] = {}
    table = root / "proc/driver/nvidia-caps/mig-minors"
    for line in table.read_text().splitlines():
        if m := re.fullmatch(r"gpu(\d+)/gi(\d+)/ci(\d+)/access (\d+)", line):
            cap = f"{CAPS_PATH}/gpu{m[1]}/mig/gi{m[2]}/ci{m[3]}/access"
        elif m := re.fullmatch(r"gpu(\d+)/gi(\d+)/access (\d+)", line):
            cap = f"{CAPS_PATH}/gpu{m[1]}/mig/gi{m[2]}/access"
        elif m := re.fullmatch(r"config (\d+)", line):
            cap = f"{CAPS_PATH}/mig/config"
        elif m := re.fullmatch(r"monitor (\d+)", line):
            cap = f"{CAPS_PATH}/mig/monitor"
        else:
            continue
        out[cap] = f"/dev/nvidia-caps/nvidia-cap{m[m.lastindex or 0]}"
    return out


def device_plugin_node_paths(paths: dict[str, str], minor: int, gi: int, ci: int) -> list[str]:
    """GetMigDeviceNodePaths, the parent's minor and GI/CI given (NVML's part)."""
    gi_cap = f"{CAPS_PATH}/gpu{minor}/mig/gi{gi}/access"
    ci_cap = f"{CAPS_PATH}/gpu{minor}/mig/gi{gi}/ci{ci}/access"
    if gi_cap not in paths or ci_cap not in paths:
        raise LookupError(f"missing MIG GPU instance capability path: {gi_cap}")
    return [f"/dev/nvidia{minor}", paths[gi_cap], paths[ci_cap]]


def get_device_major(root: Path, name: str) -> int:
    """The DRA driver's GetDeviceMajor: the Character devices block of /proc/devices."""
    text = (root / "proc/devices").read_text()
    block = text.partition("Character devices:")[2].partition("Block devices:")[0]
    m = re.search(rf"(?m)^\s*(\d+) {re.escape(name)}\n", block)
    if m is None:
        raise LookupError(f"{name} not in /proc/devices")
    return int(m[1])


@dataclass(frozen=True)
class NvCap:
    major: int
    minor: int
    mode: int
    modify: int
    path: str


def parse_nvcap(root: Path, cap: str) -> NvCap:
    """ParseNVCapDeviceInfo: ``Key: value`` lines, the nvidia-caps major."""
    values = {"DeviceFileMinor": 0, "DeviceFileMode": 0, "DeviceFileModify": 0}
    for line in (root / cap.lstrip("/")).read_text().splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in values:
            values[key.strip()] = int(value.strip())
    minor = values["DeviceFileMinor"]
    return NvCap(get_device_major(root, "nvidia-caps"), minor, values["DeviceFileMode"],
                 values["DeviceFileModify"], f"/dev/nvidia-caps/nvidia-cap{minor}")


def char_device(root: Path, path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(root / path.lstrip("/"))
    except FileNotFoundError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    return os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode)


def test_both_readers_find_every_instance_of_the_mig_profile(tmp_path: Path) -> None:
    state = state_of("h100-mig")
    with mokkafs_mount(tmp_path / "mnt", ["--profile", "h100-mig",
                                          "--node-name", "node-a"]) as mount:
        root = mount.path
        paths = device_plugin_mig_paths(root)
        assert len(paths) == 4322  # config, monitor, 32 GPUs x 15 GIs x (1 + 8)
        caps_major = get_device_major(root, "nvidia-caps")
        found = 0
        for gpu in state.mig:
            for gi in gpu.instances:
                for ci in gi.compute:
                    nodes = device_plugin_node_paths(paths, gpu.minor, gi.id, ci.id)
                    dra = [parse_nvcap(root, f"{CAPS_PATH}/gpu{gpu.minor}/mig/gi{gi.id}/access"),
                           parse_nvcap(root, f"{CAPS_PATH}/gpu{gpu.minor}/mig/gi{gi.id}"
                                       f"/ci{ci.id}/access")]
                    # the two consumers agree on the nodes, and the view has them
                    assert nodes[1:] == [d.path for d in dra]
                    for d in dra:
                        assert (d.mode, d.modify) == (292, 1)
                        assert char_device(root, d.path) == (caps_major, d.minor, d.mode)
                    assert char_device(root, nodes[0]) is not None
                    found += 1
        assert found == 15  # MIG devices (CIs): 5 + 7 + 2 + 1
        # a whole GPU has none: the DRA driver's lookup fails as on a real node
        with pytest.raises(FileNotFoundError):
            parse_nvcap(root, f"{CAPS_PATH}/gpu4/mig/gi0/access")


@pytest.mark.parametrize(("profile", "channel0"), [("gb200", True), ("gb300", True),
                                                   ("h100", False)])
def test_imex_readers_find_what_the_params_say(tmp_path: Path, profile: str,
                                               channel0: bool) -> None:
    with mokkafs_mount(tmp_path / "mnt", ["--profile", profile,
                                          "--node-name", "node-a"]) as mount:
        root = mount.path
        # the device plugin (strategy auto): channel 0 when it is a character device
        found = char_device(root, "/dev/nvidia-caps-imex-channels/channel0")
        assert (found is not None) is channel0
        # the DRA driver: ImexChannelCount channels on the major /proc/devices names
        params = dict(line.split(": ", 1) for line in
                      (root / "proc/driver/nvidia/params").read_text().splitlines())
        count = int(params["ImexChannelCount"])
        major = get_device_major(root, "nvidia-caps-imex-channels")
        infos = [(major, i, 0o666, f"/dev/nvidia-caps-imex-channels/channel{i}")
                 for i in range(count)]
        assert count == 2048 and len(infos) == 2048
        assert params["CreateImexChannel0"] == ("1" if channel0 else "0")
        if found is not None:
            assert found == infos[0][:3]
        # the IMEX daemon's capability, which the compute-domain plugin reads
        cap = parse_nvcap(root, f"{CAPS_PATH}/fabric-imex-mgmt")
        assert cap.minor == 4323 and cap.mode == 256
